-- Every stage: items dropped and why (feeds v_stage_funnel).
CREATE TABLE IF NOT EXISTS rejections (
    rejection_id VARCHAR PRIMARY KEY,  -- content hash of (stage, item, reason)
    stage        VARCHAR NOT NULL,     -- ingest | synthesize | sample | generate | verify
    item_id      VARCHAR NOT NULL,     -- the dropped item's id (doc, tool, sequence, dag, task)
    reason       VARCHAR NOT NULL,     -- short category, e.g. cyclic_dag, no_write_tool
    detail       VARCHAR,              -- the full message
    run_id       VARCHAR               -- the run that dropped it
);
