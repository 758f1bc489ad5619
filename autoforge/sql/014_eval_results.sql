-- Stage 6 (eval): pass^k per environment and overall.
CREATE TABLE IF NOT EXISTS eval_results (
    result_id  VARCHAR PRIMARY KEY, -- content hash of (eval, env, k)
    eval_id    VARCHAR NOT NULL,   -- the evaluation
    agent      VARCHAR NOT NULL,   -- agent name
    user_sim   VARCHAR NOT NULL,   -- simulated user name
    env_id     VARCHAR,            -- environment, NULL for the overall row
    k          INTEGER NOT NULL,   -- k of pass^k
    pass_hat_k DOUBLE NOT NULL,    -- tau-bench pass^k estimate
    ci_low     DOUBLE,             -- 95% confidence interval, low end
    ci_high    DOUBLE,             -- 95% confidence interval, high end
    n_tasks    INTEGER NOT NULL,   -- tasks evaluated
    run_id     VARCHAR             -- the run that made it
);
