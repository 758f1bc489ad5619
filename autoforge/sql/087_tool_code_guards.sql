-- Stage 2 (issue 33): the guards of a tool, the runtime rules (tool_rules.enforcement = 'runtime')
-- the rule engine (autoforge/envs/guards.py) checks in the sandbox before the tool's code runs.
-- They travel with the tool's code, so every environment built from tool_code rows enforces them.
ALTER TABLE tool_code ADD COLUMN IF NOT EXISTS guards JSON DEFAULT '[]'; -- list of guard objects (op, rule_id, message, ...)
