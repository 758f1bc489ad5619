-- Stage 7 (train, issue 34): each task's pass rate under a training run's policy at one point. Before
-- ERPO every train task (or a seeded sample: TrainConfig.pass_rate_max_tasks) is played
-- pass_rate_samples times as ERPO plays it (sampling temperature, injected user errors, the judge):
-- source 'estimate'; ERPO trains on the tasks whose rate is strictly between 0 and 1 (kept). The
-- held-out evaluations at start / sft / end give one row per test task too: source 'eval'.
-- v_learnable_tasks and v_curriculum read it per environment and per tool.
CREATE TABLE IF NOT EXISTS task_pass_rates (
    train_run_id VARCHAR NOT NULL,   -- the training run (training_runs)
    point        VARCHAR NOT NULL CHECK (point IN ('start', 'sft', 'end')),  -- weights: before training, after SFT (= before ERPO), after ERPO
    source       VARCHAR NOT NULL CHECK (source IN ('estimate', 'eval')),    -- estimate: train task, ERPO's rollouts; eval: held-out task
    checkpoint   VARCHAR,            -- the checkpoint holding those weights ('sft-000258'); NULL: none
    task_id      VARCHAR NOT NULL,   -- the task (tasks)
    env_id       VARCHAR NOT NULL,   -- its environment
    k            INTEGER NOT NULL,   -- rollouts asked for
    n_episodes   INTEGER NOT NULL,   -- rollouts played (one that crashed before the agent's first turn is not counted)
    n_pass       INTEGER NOT NULL,   -- of those, reward 1.0
    n_invalid    INTEGER NOT NULL,   -- of those, judge-flagged or unscored
    pass_rate    DOUBLE NOT NULL,    -- n_pass / n_episodes (0 when none was played)
    learnable    BOOLEAN NOT NULL,   -- 0 < pass_rate < 1: its rollouts can disagree, so an ERPO group can teach
    kept         BOOLEAN NOT NULL,   -- estimate: ERPO trains on it (learnable, or every task when too few are)
    tools        JSON NOT NULL,      -- the task's gold tool names (JSON list)
    created_at   TIMESTAMP NOT NULL, -- UTC
    run_id       VARCHAR,            -- the flow run
    PRIMARY KEY (train_run_id, point, source, task_id)
);
