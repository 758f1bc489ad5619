-- Stage 2 (issue 33): one rule model for the rules a tool's prose states and those of a policy
-- document (policy_docs). tool_rules gains where a rule comes from (source, source_offset), the
-- tools it binds, its guard (the check the rule engine, autoforge/envs/guards.py, runs before the
-- tool, or the check the rule judge runs over the conversation) and why it is not enforced; its
-- enforcement gains 'runtime' (a guard) and 'judged'. DuckDB cannot change a CHECK constraint, so
-- the table is rebuilt once, in place, with its rows (postgresql/086 alters it instead).
ALTER TABLE tool_rules RENAME TO tool_rules_before_086;
CREATE TABLE tool_rules (
    rule_id       VARCHAR PRIMARY KEY,  -- content hash of (env, source, tool, index, kind, text)
    env_id        VARCHAR NOT NULL,     -- the environment that enforces (or not) the rule
    tool_id       VARCHAR NOT NULL,     -- the tool_specs row of the tool it binds first ('' for a rule bound to none)
    tool          VARCHAR NOT NULL,     -- that tool's name ('' for a rule bound to none)
    kind          VARCHAR NOT NULL,     -- what the rule says (a name in domain.rule_kinds.RULE_KINDS)
    text          VARCHAR NOT NULL,     -- the sentence it was read from
    field         VARCHAR,              -- record field (status, frozen_at) or the parameter it constrains
    "values"      JSON NOT NULL,        -- allowed / resulting statuses, NOW for a timestamp, a constraint's numbers
    enforcement   VARCHAR NOT NULL CHECK (enforcement IN ('code', 'runtime', 'judged', 'not enforced')),  -- code: the tool's code; runtime: a guard; judged: over the conversation
    probe         VARCHAR NOT NULL CHECK (probe IN ('passed', 'failed', 'none')),  -- synthesis probe of an enforced rule
    probe_detail  VARCHAR,              -- what the probe saw (refusal text, status after the call)
    run_id        VARCHAR,              -- the run that made it
    source        VARCHAR NOT NULL DEFAULT 'tool',  -- 'tool' (the tool's own prose) or the policy document's source
    source_offset INTEGER,              -- character offset of the sentence in that document
    tools         JSON NOT NULL DEFAULT '[]',  -- every tool the rule binds (public names)
    guard         JSON,                 -- the guard or judged check (autoforge/envs/guards.py); NULL: none
    why           VARCHAR               -- not enforced: why
);
INSERT INTO tool_rules (rule_id, env_id, tool_id, tool, kind, text, field, "values", enforcement, probe, probe_detail, run_id, tools)
SELECT rule_id, env_id, tool_id, tool, kind, text, field, "values", enforcement, probe, probe_detail, run_id, json_array(tool)
FROM tool_rules_before_086;
DROP TABLE tool_rules_before_086;
