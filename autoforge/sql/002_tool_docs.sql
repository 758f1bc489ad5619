-- Stage 1 (ingest): every tool-documentation file seen, accepted or rejected with its reason.
CREATE TABLE IF NOT EXISTS tool_docs (
    doc_id  VARCHAR PRIMARY KEY,  -- content hash of (toolset, path, content)
    toolset VARCHAR NOT NULL,     -- name of the tool set (candidate environment) it belongs to
    path    VARCHAR NOT NULL,     -- where it was read from
    format  VARCHAR CHECK (format IN ('openai', 'mcp', 'openapi', 'markdown')),  -- detected format, NULL if undetectable
    content VARCHAR NOT NULL,     -- raw text of the document
    status  VARCHAR NOT NULL CHECK (status IN ('accepted', 'rejected', 'needs_llm')),  -- needs_llm: prose, parsed only by an LLM backend
    error   VARCHAR,              -- for rejected docs: file, location inside it and reason
    n_tools INTEGER NOT NULL,     -- tools parsed from it
    run_id  VARCHAR               -- the run that ingested it
);
