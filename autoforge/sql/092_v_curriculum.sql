-- Stage 7 (train, issue 34): the curriculum signal per training run, point, source, environment and
-- gold tool (a task counts once for each tool its gold calls): tasks, mean pass rate, the share that
-- is learnable (0 < pass rate < 1), always and never solved. A tool whose tasks are never solved at
-- every point is one the policy does not learn; one always solved teaches nothing more.
CREATE OR REPLACE VIEW v_curriculum AS
WITH rates_ AS (                                   -- import: per-task pass rates, one row per gold tool
    SELECT train_run_id, point, source, env_id, task_id, pass_rate, learnable,
           unnest(json_extract_string(tools, '$[*]')) AS tool
    FROM task_pass_rates
),
environments_ AS (                                 -- import: environment names
    SELECT env_id, name FROM environments
),
per_tool AS (                                      -- logic: per run, point, source, environment and tool
    SELECT train_run_id, point, source, env_id, tool,
           count(DISTINCT task_id) AS tasks,
           avg(pass_rate) AS mean_pass_rate,
           avg(CASE WHEN learnable THEN 1 ELSE 0 END::DOUBLE) AS learnable_share,
           count(*) FILTER (WHERE pass_rate >= 1.0) AS always_solved,
           count(*) FILTER (WHERE pass_rate <= 0.0) AS never_solved
    FROM rates_ GROUP BY train_run_id, point, source, env_id, tool
)
SELECT
    t.train_run_id,                                -- the training run
    t.point,                                       -- start | sft (= before ERPO) | end
    t.source,                                      -- estimate (train tasks, ERPO's rollouts) | eval (held-out tasks)
    t.env_id,                                      -- the environment
    e.name AS env_name,                            -- its name
    t.tool,                                        -- a gold tool of the tasks
    t.tasks,                                       -- tasks whose gold calls it
    t.mean_pass_rate,                              -- their mean pass rate
    t.learnable_share,                             -- share of them with 0 < pass rate < 1
    t.always_solved,                               -- of them, pass rate 1
    t.never_solved                                 -- of them, pass rate 0
FROM per_tool t
LEFT JOIN environments_ e ON e.env_id = t.env_id;
