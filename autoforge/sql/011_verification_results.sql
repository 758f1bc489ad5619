-- Stage 5 (verify): one row per task and check, with the reason when it fails.
CREATE TABLE IF NOT EXISTS verification_results (
    task_id VARCHAR NOT NULL,   -- the task checked
    "check" VARCHAR NOT NULL,   -- replay_deterministic | changes_state | do_nothing_fails | read_only_fails | traceable | not_duplicate
    passed  BOOLEAN NOT NULL,   -- outcome
    reason  VARCHAR,            -- why it failed
    run_id  VARCHAR,            -- the run that checked it
    PRIMARY KEY (task_id, "check")
);
