-- Stage 2 on PostgreSQL (see sql/086): tool_rules gains source, source_offset, tools, guard and why,
-- and its enforcement CHECK gains 'runtime' and 'judged'.
ALTER TABLE tool_rules DROP CONSTRAINT IF EXISTS tool_rules_enforcement_check;
ALTER TABLE tool_rules ADD CONSTRAINT tool_rules_enforcement_check CHECK (enforcement IN ('code', 'runtime', 'judged', 'not enforced'));
ALTER TABLE tool_rules ADD COLUMN IF NOT EXISTS source VARCHAR NOT NULL DEFAULT 'tool';
ALTER TABLE tool_rules ADD COLUMN IF NOT EXISTS source_offset INTEGER;
ALTER TABLE tool_rules ADD COLUMN IF NOT EXISTS tools JSON NOT NULL DEFAULT '[]';
UPDATE tool_rules SET tools = json_build_array(tool);
ALTER TABLE tool_rules ADD COLUMN IF NOT EXISTS guard JSON;
ALTER TABLE tool_rules ADD COLUMN IF NOT EXISTS why VARCHAR;
