-- Stage 1 (ingest): whether a tool set has state at all, judged over all of its tools
-- (autoforge.tooldocs.effects.classify_toolset): a calculator or a web search is 'stateless'.
ALTER TABLE toolsets ADD COLUMN IF NOT EXISTS kind VARCHAR DEFAULT 'stateful';  -- stateful | stateless (no tool can change state)
