-- Stages 4-6 (issue 33): which rules a task exercises and which an episode broke, so a rule's
-- coverage (v_rule_coverage, sql/089) counts the tasks that teach it and the episodes that broke it.
-- Both hold tool_rules.rule_id values; a row written before this file (or by a writer that does not
-- fill them yet) holds the empty list.
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS rules JSON DEFAULT '[]';            -- rule ids the task's gold exercises
ALTER TABLE episodes ADD COLUMN IF NOT EXISTS rule_breaks JSON DEFAULT '[]';   -- rule ids the episode broke (refused calls, judged rules)
