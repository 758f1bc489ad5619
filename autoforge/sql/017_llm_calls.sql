-- Every LLM call (and cache hit) with tokens, latency and outcome; also the response cache.
CREATE TABLE IF NOT EXISTS llm_calls (
    call_id     VARCHAR PRIMARY KEY,  -- unique id of the call
    backend     VARCHAR NOT NULL,     -- openai | offline
    model       VARCHAR NOT NULL,     -- model name
    step        VARCHAR NOT NULL,     -- pipeline step that asked (state_schema, tool_code, edges, user_sim, judge ...)
    prompt_hash VARCHAR NOT NULL,     -- hash of (model, messages, response format): the cache key
    prompt      JSON NOT NULL,        -- messages sent
    response    JSON,                 -- parsed reply
    tokens_in   INTEGER,              -- prompt tokens
    tokens_out  INTEGER,              -- completion tokens
    latency_ms  DOUBLE,               -- wall time of the call
    outcome     VARCHAR NOT NULL CHECK (outcome IN ('ok', 'cached', 'invalid', 'error')),  -- result
    error       VARCHAR,              -- error message for invalid/error
    created_at  TIMESTAMP NOT NULL,   -- UTC
    run_id      VARCHAR               -- the run that made it
);
