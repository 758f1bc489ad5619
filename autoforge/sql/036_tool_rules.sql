-- Stage 2 (synthesize): rules a tool's prose states, how the tool code enforces them, and the probe outcome.
CREATE TABLE IF NOT EXISTS tool_rules (
    rule_id      VARCHAR PRIMARY KEY,  -- content hash of (env, tool, index, kind, text)
    env_id       VARCHAR NOT NULL,     -- the environment whose code enforces (or not) the rule
    tool_id      VARCHAR NOT NULL,     -- the tool_specs row whose prose states it
    tool         VARCHAR NOT NULL,     -- tool name
    kind         VARCHAR NOT NULL CHECK (kind IN ('source_status', 'result_status', 'side_effect', 'constraint', 'unparsed')),  -- what the rule says
    text         VARCHAR NOT NULL,     -- the sentence it was read from
    field        VARCHAR,              -- record field (status, frozen_at) or the parameter it constrains
    "values"     JSON NOT NULL,        -- allowed / resulting statuses, NOW for a timestamp, a constraint's numbers
    enforcement  VARCHAR NOT NULL CHECK (enforcement IN ('code', 'not enforced')),  -- whether the tool code enforces it
    probe        VARCHAR NOT NULL CHECK (probe IN ('passed', 'failed', 'none')),  -- synthesis probe of an enforced rule
    probe_detail VARCHAR,              -- what the probe saw (refusal text, status after the call)
    run_id       VARCHAR               -- the run that made it
);
