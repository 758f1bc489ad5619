-- PostgreSQL version of sql/092_v_curriculum.sql (applied there instead of it; DuckDB applies sql/092_v_curriculum.sql as it is).
-- unnest(json_extract_string(x, '$[*]')) (the strings of a JSON list, one row each) is json_array_elements_text(x);
-- ::DOUBLE is ::DOUBLE PRECISION. Otherwise the same text.
DROP VIEW IF EXISTS v_curriculum;
CREATE VIEW v_curriculum AS
WITH rates_ AS (                                   -- import: per-task pass rates, one row per gold tool
    SELECT train_run_id, point, source, env_id, task_id, pass_rate, learnable,
           json_array_elements_text(tools) AS tool
    FROM task_pass_rates
),
environments_ AS (                                 -- import: environment names
    SELECT env_id, name FROM environments
),
per_tool AS (                                      -- logic: per run, point, source, environment and tool
    SELECT train_run_id, point, source, env_id, tool,
           count(DISTINCT task_id) AS tasks,
           avg(pass_rate) AS mean_pass_rate,
           avg(CASE WHEN learnable THEN 1 ELSE 0 END::DOUBLE PRECISION) AS learnable_share,
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
