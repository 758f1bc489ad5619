-- Stage 2 (synthesize): the Python names behind a tool whose public names are not identifiers
-- (MCP `orders.get`, OpenAPI `get-order`, a parameter `order-id`, `from` or `state`).
-- The agent and the JSON Schema use the public names; the runtime renames each call.
ALTER TABLE tool_code ADD COLUMN IF NOT EXISTS function_name VARCHAR;     -- Python function implementing the tool (NULL: same as name)
ALTER TABLE tool_code ADD COLUMN IF NOT EXISTS arg_map JSON DEFAULT '{}'; -- public argument name -> Python parameter name, where they differ
