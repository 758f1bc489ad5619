-- Stage 3 (sample): per environment, the directed tool graph (A -> B: an output of A can feed an input of B).
CREATE TABLE IF NOT EXISTS tool_graphs (
    graph_id VARCHAR PRIMARY KEY,  -- content hash of (env, edges)
    env_id   VARCHAR NOT NULL,     -- the environment
    tools    JSON NOT NULL,        -- node list (tool names)
    edges    JSON NOT NULL,        -- [{src, dst, bindings: [{output_path, param}]}]
    method   VARCHAR NOT NULL,     -- offline (name/type binding) | openai:<model> (LLM judgement)
    run_id   VARCHAR               -- the run that made it
);
