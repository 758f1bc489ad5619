-- Stage 7 (train): per-step metrics (reward per env, masked fraction, dropped tasks, loss, KL, entropy, tokens/s).
CREATE TABLE IF NOT EXISTS training_steps (
    train_run_id VARCHAR NOT NULL,  -- the training run
    step         INTEGER NOT NULL,  -- optimizer step
    phase        VARCHAR NOT NULL CHECK (phase IN ('sft', 'erpo')),  -- which phase
    metrics      JSON NOT NULL,     -- metric name -> value
    PRIMARY KEY (train_run_id, phase, step)
);
