-- Stages 2 and 5 (issue 32): world checks, one row per finding of autoforge/domain/world_checks.py.
-- Synthesis checks each environment's sample state (task_id NULL) and keeps the environment either
-- way; verification checks each task's initial state (the records its gold run uses), gold
-- arguments and gold writes, rejects a task holding a finding of a kind that rejects (check `world`)
-- and stores the findings of every task it checks: a verified task holds only the kinds that do not
-- reject (format_mismatch). Rows are upserts by content (a re-check writes the
-- same ids); a task re-checked later keeps the rows it had.
CREATE TABLE IF NOT EXISTS world_checks (
    check_id   VARCHAR PRIMARY KEY,  -- content hash of (env, task, kind, path, message)
    env_id     VARCHAR NOT NULL,     -- the environment whose world it is
    task_id    VARCHAR,              -- the task checked at verification; NULL: the environment's sample state
    kind       VARCHAR NOT NULL,     -- a name in domain.world_checks.FINDING_KINDS: dangling_reference | nested_reference | placeholder | empty_container | type_mismatch | format_mismatch | write_outside_effect
    path       VARCHAR NOT NULL,     -- where: collection.record.field, "call N (tool).argument" or "call N (tool): collection.record.field"
    value      VARCHAR NOT NULL,     -- the value found there, as JSON text (cut at 500 characters)
    message    VARCHAR NOT NULL,     -- why it is wrong
    run_id     VARCHAR,              -- the run that checked it
    checked_at TIMESTAMP NOT NULL    -- UTC
);
