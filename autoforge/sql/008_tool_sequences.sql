-- Stage 3 (sample): tool sequences from random walks, and merged multi-requirement sequences.
CREATE TABLE IF NOT EXISTS tool_sequences (
    seq_id  VARCHAR PRIMARY KEY,  -- content hash of (env, tools)
    env_id  VARCHAR NOT NULL,     -- the environment
    tools   JSON NOT NULL,        -- ordered tool names
    source  VARCHAR NOT NULL CHECK (source IN ('walk', 'merge')),  -- how it was made
    parents JSON NOT NULL,        -- seq_ids merged into it (empty for walks)
    seed    INTEGER,              -- random seed of the walk
    run_id  VARCHAR               -- the run that made it
);
