-- Stage 7 (train): one row per training run with its full config.
CREATE TABLE IF NOT EXISTS training_runs (
    train_run_id VARCHAR PRIMARY KEY,  -- the run's id (also its checkpoint folder)
    config       JSON NOT NULL,        -- the full training config
    status       VARCHAR NOT NULL CHECK (status IN ('running', 'completed', 'failed')),  -- lifecycle
    started_at   TIMESTAMP NOT NULL,   -- UTC
    finished_at  TIMESTAMP,            -- UTC
    run_id       VARCHAR               -- the flow run that started it
);
