-- Stage 2 (synthesize): whether a tool's output schema is the documented one or was derived from the
-- state model because the docs give none (MCP tools/list and many OpenAI schemas document no output).
ALTER TABLE tool_code ADD COLUMN IF NOT EXISTS output_schema_source VARCHAR DEFAULT 'documented';  -- documented | derived (from the state model)
