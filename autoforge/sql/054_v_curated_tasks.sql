-- Stage 5 (verify): the curated corpus: verified tasks with their kind, difficulty and split (issues 4, 14, 16).
-- Replaces 049 (applied migrations are never edited): the same columns and rows, n_checks_passed read
-- from the task's row. Training reads split = 'train'; held-out evaluation reads split = 'test'.
CREATE OR REPLACE VIEW v_curated_tasks AS
WITH verified AS (  -- import: tasks that passed every check
    SELECT * FROM tasks WHERE status = 'verified'
),
envs AS (  -- import: environment names
    SELECT env_id, name AS env_name FROM environments
),
final AS (
    SELECT
        v.task_id,                                         -- content hash of (env, DAG, state change, S)
        v.env_id,                                          -- environment whose tools solve it
        e.env_name,                                        -- its name (NULL if the environment row is gone)
        v.dag_id,                                          -- the blueprint
        v.split,                                           -- train | test (from the task id hash)
        v.kind,                                            -- state (reward: final state == S*) | answer (final message states gold_answer)
        v.gold_answer,                                     -- answer tasks: value, kind, tolerance, field (NULL for state tasks)
        v.n_tool_calls,                                    -- difficulty: gold tool calls
        v.dag_depth,                                       -- difficulty: nodes on the longest DAG path
        v.n_reasoning_nodes,                               -- difficulty: reasoning nodes
        v.n_requirements,                                  -- difficulty: merged requirements
        v.n_reasoning_nodes > 0 AS has_reasoning,          -- at least one reasoning node
        v.n_requirements >= 2 AS is_multi_requirement,     -- merged from two or more sequences
        coalesce(v.n_checks_passed, 0) AS n_checks_passed, -- verification checks passed
        v.request,                                         -- the user's opening message
        v.batch_id,                                        -- factory batch
        v.run_id                                           -- the verify run
    FROM verified v
    LEFT JOIN envs e USING (env_id)
)
SELECT * FROM final;
