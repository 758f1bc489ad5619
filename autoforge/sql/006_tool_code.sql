-- Stage 2 (synthesize): the Python source of each tool of an environment, with its check outcome.
CREATE TABLE IF NOT EXISTS tool_code (
    code_id       VARCHAR PRIMARY KEY,  -- content hash of (env, name, source)
    env_id        VARCHAR NOT NULL,     -- the environment it belongs to
    tool_id       VARCHAR NOT NULL,     -- the tool_specs row it implements
    name          VARCHAR NOT NULL,     -- tool name
    source        VARCHAR NOT NULL,     -- Python source of the function
    status        VARCHAR NOT NULL CHECK (status IN ('accepted', 'rejected')),  -- passed every check or not
    reason        VARCHAR,              -- for rejected code: which check failed and how
    attempts      INTEGER NOT NULL,     -- generation + repair attempts used
    effect        VARCHAR NOT NULL CHECK (effect IN ('read', 'write', 'unknown')),  -- side effect on state
    kind          VARCHAR NOT NULL,     -- offline template kind (lookup, get, list, create, update, delete ...) or llm
    collection    VARCHAR,              -- main collection it reads or writes
    parameters    JSON NOT NULL,        -- JSON Schema the arguments are validated against before the call
    output_schema JSON,                 -- what the code returns on success (used to bind DAG edges)
    run_id        VARCHAR               -- the run that made it
);
