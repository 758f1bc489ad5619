-- Stage 3 (sample): which merged requirement each tool of a sequence serves (issue 4).
ALTER TABLE tool_sequences ADD COLUMN IF NOT EXISTS requirements JSON DEFAULT '[]';  -- per tool: requirement index (0, 1, ...)
