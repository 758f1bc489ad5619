-- One execution of a stage or of the whole factory. Every other row's run_id points here.
CREATE TABLE IF NOT EXISTS runs (
    run_id      VARCHAR PRIMARY KEY,  -- content hash of (stage, batch, params): a re-run of the same batch reuses it
    stage       VARCHAR NOT NULL,     -- ingest | synthesize | sample | generate | verify | factory | train | eval
    batch_id    VARCHAR,              -- the factory batch this run belongs to (NULL for ad-hoc runs)
    params      JSON NOT NULL,        -- the parameters the run was started with
    status      VARCHAR NOT NULL CHECK (status IN ('running', 'completed', 'failed')),  -- lifecycle
    counts      JSON NOT NULL,        -- items in / out / rejected, filled when the run ends
    started_at  TIMESTAMP NOT NULL,   -- UTC
    finished_at TIMESTAMP             -- UTC, NULL while running
);
