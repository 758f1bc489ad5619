-- Stage 1 (ingest): one tool set per documentation set: a candidate environment.
CREATE TABLE IF NOT EXISTS toolsets (
    toolset_id  VARCHAR PRIMARY KEY,  -- content hash of (name, tool ids)
    name        VARCHAR NOT NULL,     -- tool set name (folder or file stem)
    description VARCHAR NOT NULL,     -- what the tool set is for
    doc_ids     JSON NOT NULL,        -- tool_docs rows it came from
    tool_ids    JSON NOT NULL,        -- tool_specs rows it holds
    n_tools     INTEGER NOT NULL,     -- number of tools
    run_id      VARCHAR               -- the run that made it
);
