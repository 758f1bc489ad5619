-- Stages 1-2: tool_docs.format and tool_rules.kind lose their CHECK lists (issue 31). Doc formats
-- (autoforge/tooldocs/formats.py) and rule kinds (autoforge/domain/rule_kinds.py) are open
-- vocabularies held by Python registries that refuse an unknown name when a record is built; a
-- CHECK list here meant a table rebuild for every new format or kind. Closed lifecycles (statuses,
-- splits, effects, enforcement, probe) keep theirs. DuckDB cannot drop a CHECK constraint, so each
-- table is rebuilt once, in place, with the same columns and rows (postgresql/082 drops them instead).
ALTER TABLE tool_docs RENAME TO tool_docs_before_082;
CREATE TABLE tool_docs (
    doc_id  VARCHAR PRIMARY KEY,  -- content hash of (toolset, path, content)
    toolset VARCHAR NOT NULL,     -- name of the tool set (candidate environment) it belongs to
    path    VARCHAR NOT NULL,     -- where it was read from
    format  VARCHAR,              -- detected format (a name in tooldocs.formats.DOC_FORMATS), NULL if undetectable
    content VARCHAR NOT NULL,     -- raw text of the document
    status  VARCHAR NOT NULL CHECK (status IN ('accepted', 'rejected', 'needs_llm')),  -- needs_llm: prose, parsed only by an LLM backend
    error   VARCHAR,              -- for rejected docs: file, location inside it and reason
    n_tools INTEGER NOT NULL,     -- tools parsed from it
    run_id  VARCHAR               -- the run that ingested it
);
INSERT INTO tool_docs (doc_id, toolset, path, format, content, status, error, n_tools, run_id)
SELECT doc_id, toolset, path, format, content, status, error, n_tools, run_id FROM tool_docs_before_082;
DROP TABLE tool_docs_before_082;
ALTER TABLE tool_rules RENAME TO tool_rules_before_082;
CREATE TABLE tool_rules (
    rule_id      VARCHAR PRIMARY KEY,  -- content hash of (env, tool, index, kind, text)
    env_id       VARCHAR NOT NULL,     -- the environment whose code enforces (or not) the rule
    tool_id      VARCHAR NOT NULL,     -- the tool_specs row whose prose states it
    tool         VARCHAR NOT NULL,     -- tool name
    kind         VARCHAR NOT NULL,     -- what the rule says (a name in domain.rule_kinds.RULE_KINDS)
    text         VARCHAR NOT NULL,     -- the sentence it was read from
    field        VARCHAR,              -- record field (status, frozen_at) or the parameter it constrains
    "values"     JSON NOT NULL,        -- allowed / resulting statuses, NOW for a timestamp, a constraint's numbers
    enforcement  VARCHAR NOT NULL CHECK (enforcement IN ('code', 'not enforced')),  -- whether the tool code enforces it
    probe        VARCHAR NOT NULL CHECK (probe IN ('passed', 'failed', 'none')),  -- synthesis probe of an enforced rule
    probe_detail VARCHAR,              -- what the probe saw (refusal text, status after the call)
    run_id       VARCHAR               -- the run that made it
);
INSERT INTO tool_rules (rule_id, env_id, tool_id, tool, kind, text, field, "values", enforcement, probe, probe_detail, run_id)
SELECT rule_id, env_id, tool_id, tool, kind, text, field, "values", enforcement, probe, probe_detail, run_id
FROM tool_rules_before_082;
DROP TABLE tool_rules_before_082;
