-- Stage 2 (synthesize): E = (S, F), the state structure of a tool set and its status.
CREATE TABLE IF NOT EXISTS environments (
    env_id           VARCHAR PRIMARY KEY,  -- content hash of (toolset, schema, tool sources)
    name             VARCHAR NOT NULL,     -- environment name (= tool set name)
    toolset_id       VARCHAR NOT NULL,     -- the toolsets row it was synthesized from
    backend          VARCHAR NOT NULL,     -- offline | openai:<model>
    state_schema     JSON NOT NULL,        -- collections, fields, types, keys, references
    sample_state     JSON NOT NULL,        -- a small valid state used for smoke calls
    status           VARCHAR NOT NULL CHECK (status IN ('ready', 'partial', 'failed')),  -- ready: all tools accepted
    n_tools          INTEGER NOT NULL,     -- tools in the tool set
    n_tools_accepted INTEGER NOT NULL,     -- tools whose code passed every check
    reason           VARCHAR,              -- why it is partial or failed
    run_id           VARCHAR               -- the run that made it
);
