-- Stages 1-2 on PostgreSQL: the CHECK lists over open vocabularies go (see sql/082): doc formats
-- (autoforge/tooldocs/formats.py) and rule kinds (autoforge/domain/rule_kinds.py) are validated by
-- their Python registries. PostgreSQL names an unnamed column CHECK <table>_<column>_check.
ALTER TABLE tool_docs DROP CONSTRAINT IF EXISTS tool_docs_format_check;
ALTER TABLE tool_rules DROP CONSTRAINT IF EXISTS tool_rules_kind_check;
