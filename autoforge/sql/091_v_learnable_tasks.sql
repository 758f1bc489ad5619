-- Stage 7 (train, issue 34): per training run, point, source and environment, how many tasks the
-- policy could learn from: estimated, learnable (0 < pass rate < 1), always solved, never solved,
-- kept for ERPO, and the mean pass rate. An environment whose tasks are all always or never solved
-- teaches ERPO nothing at that point (every group of its rollouts agrees and is dropped).
CREATE OR REPLACE VIEW v_learnable_tasks AS
WITH rates_ AS (                                   -- import: per-task pass rates
    SELECT train_run_id, point, source, checkpoint, env_id, k, n_episodes, n_invalid, pass_rate, learnable, kept
    FROM task_pass_rates
),
environments_ AS (                                 -- import: environment names
    SELECT env_id, name FROM environments
),
per_env AS (                                       -- logic: counts per run, point, source and environment
    SELECT train_run_id, point, source, env_id,
           max(checkpoint) AS checkpoint,
           max(k) AS k,
           count(*) AS tasks,
           count(*) FILTER (WHERE learnable) AS learnable,
           count(*) FILTER (WHERE pass_rate >= 1.0) AS always_solved,
           count(*) FILTER (WHERE pass_rate <= 0.0) AS never_solved,
           count(*) FILTER (WHERE kept) AS kept,
           avg(pass_rate) AS mean_pass_rate,
           sum(n_episodes) AS episodes,
           sum(n_invalid) AS invalid_episodes
    FROM rates_ GROUP BY train_run_id, point, source, env_id
)
SELECT
    p.train_run_id,                                -- the training run
    p.point,                                       -- start | sft (= before ERPO) | end
    p.source,                                      -- estimate (train tasks, ERPO's rollouts) | eval (held-out tasks)
    p.checkpoint,                                  -- the checkpoint of those weights (NULL: none)
    p.env_id,                                      -- the environment
    e.name AS env_name,                            -- its name
    p.k,                                           -- rollouts per task
    p.tasks,                                       -- tasks estimated / evaluated
    p.learnable,                                   -- 0 < pass rate < 1
    p.always_solved,                               -- pass rate 1
    p.never_solved,                                -- pass rate 0
    p.kept,                                        -- estimate: tasks ERPO trains on
    p.mean_pass_rate,                              -- mean over tasks of the pass rate
    p.episodes,                                    -- rollouts played
    p.invalid_episodes                             -- of those, judge-flagged or unscored
FROM per_env p
LEFT JOIN environments_ e ON e.env_id = p.env_id;
