-- Stage 1 (issue 33): policy documents, the business rules a tool set ships beside its tool docs
-- (policy.md / policy.txt in its folder, a file given with --policy) or inside them (OpenAPI
-- info.description and tag descriptions, an MCP result's instructions). Stored as read; their rules
-- are not enforced yet. A row is written once per content (re-ingesting the same text adds nothing);
-- a changed text replaces the tool set's row(s) of that source in the same transaction.
CREATE TABLE IF NOT EXISTS policy_docs (
    policy_id   VARCHAR PRIMARY KEY,  -- content hash of (toolset, source, sha256)
    toolset     VARCHAR NOT NULL,     -- name of the tool set it governs
    toolset_id  VARCHAR,              -- toolsets.toolset_id of that tool set (a policy file is part of its hash); NULL: the folder defines no tool
    source      VARCHAR NOT NULL,     -- the file it was read from, or "<file>#<location>" for text inside a tool doc
    sha256      VARCHAR NOT NULL,     -- sha256 of text (hex)
    text        VARCHAR NOT NULL,     -- the policy text as read
    n_chars     INTEGER NOT NULL,     -- characters of text
    run_id      VARCHAR,              -- the run that first ingested it
    ingested_at TIMESTAMP NOT NULL    -- UTC, when it was first ingested
);
