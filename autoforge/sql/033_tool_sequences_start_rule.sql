-- Stage 3 (sample): where the walks of a sequence were allowed to start. With the adaptive rule
-- (start = auto) sampling tries lookups, then any read, then any tool with no required id.
ALTER TABLE tool_sequences ADD COLUMN IF NOT EXISTS start_rule VARCHAR;  -- lookup | read | entry | any: the start rule used
