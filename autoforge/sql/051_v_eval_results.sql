-- Stage 6 (eval): pass^k per evaluation, environment (NULL = overall) and k, with its interval and episode counts.
-- Contract (issue 5): eval_id, agent, user_sim, env_id, k, pass_hat_k, n_tasks.
CREATE OR REPLACE VIEW v_eval_results AS
WITH results AS (                                  -- one row per (eval, env or overall, k)
    SELECT eval_id, agent, user_sim, env_id, k, pass_hat_k, ci_low, ci_high, n_tasks, run_id
    FROM eval_results
),
episode_counts AS (                                -- episodes of each eval, per environment and overall
    SELECT eval_id, env_id, count(*) AS n_episodes, avg(reward) AS mean_reward,
           count(*) FILTER (WHERE reward IS NULL) AS n_unscored,
           count(*) FILTER (WHERE user_error) AS n_user_errors,
           count(*) FILTER (WHERE judge_flag) AS n_judge_flags
    FROM episodes WHERE eval_id IS NOT NULL GROUP BY GROUPING SETS ((eval_id, env_id), (eval_id))
)
SELECT
    r.eval_id,                                     -- the evaluation
    r.agent,                                       -- agent name
    r.user_sim,                                    -- simulated user name and error-injection settings
    r.env_id,                                      -- environment, NULL for the overall row
    e.name AS env_name,                            -- environment name (NULL overall)
    r.k,                                           -- k of pass^k
    r.pass_hat_k,                                  -- tau-bench pass^k (mean over tasks of C(c,k)/C(n,k))
    r.ci_low,                                      -- 95% bootstrap-over-tasks interval, low end
    r.ci_high,                                     -- 95% bootstrap-over-tasks interval, high end
    r.n_tasks,                                     -- tasks with at least k trials
    c.n_episodes,                                  -- episodes behind the row
    c.n_unscored,                                  -- episodes that could not be scored (counted as failures)
    c.n_user_errors,                               -- episodes with an injected user error that manifested
    c.n_judge_flags,                               -- episodes the user-error judge flagged
    r.run_id                                       -- the eval run
FROM results r
LEFT JOIN environments e ON e.env_id = r.env_id
LEFT JOIN episode_counts c ON c.eval_id = r.eval_id AND c.env_id IS NOT DISTINCT FROM r.env_id
ORDER BY r.eval_id, r.env_id NULLS LAST, r.k;
