-- Stage 1 (ingest): normalised tools (ToolSpec), one row per tool of a tool set.
CREATE TABLE IF NOT EXISTS tool_specs (
    tool_id       VARCHAR PRIMARY KEY,  -- content hash of (toolset, name, parameters, output schema)
    toolset       VARCHAR NOT NULL,     -- tool set (candidate environment) name
    name          VARCHAR NOT NULL,     -- tool name as the agent calls it
    description   VARCHAR NOT NULL,     -- documentation text
    parameters    JSON NOT NULL,        -- JSON Schema of the arguments, every $ref resolved
    output_schema JSON,                 -- JSON Schema of a successful result, when documented
    effect        VARCHAR NOT NULL CHECK (effect IN ('read', 'write', 'unknown')),  -- side effect on state
    doc_id        VARCHAR NOT NULL,     -- the tool_docs row it came from
    run_id        VARCHAR               -- the run that made it
);
