-- PostgreSQL version of sql/093_v_stage_budget.sql (applied there instead of it; DuckDB applies sql/093_v_stage_budget.sql as it is).
-- round(x, n) of a double is round(x::numeric, n)::double precision (PostgreSQL rounds numeric only); extract(epoch ...)
-- is numeric there, cast to double precision as in DuckDB.
-- Every factory batch: where its time went (issue 37). One row per (batch, stage) from the stage's run row,
-- an 'other' row (the batch's time outside the five run rows) and a 'total' row per batch; oldest batch first.
-- seconds: a stage's run row, started_at -> finished_at (the stage's work; its final write comes after
-- finished_at, and synthesize loads its inputs before started_at: both count in 'other'); 'total': the
-- batch's first stage start -> last stage finish. Items, the same definitions as v_stage_funnel's:
-- ingest documents read / accepted; synthesize tools / tools accepted; sample sequences / sequences with a DAG;
-- generate candidate tasks tried (tasks + generate rejections) / tasks kept; verify tasks checked / verified.
-- A stage run outside a batch (autoforge generate ...) is a batch of its own (batch_id = its run_id).
-- A re-run of a batch replaces its run rows (run ids are a hash of stage, batch and params).
DROP VIEW IF EXISTS v_stage_budget;
CREATE VIEW v_stage_budget AS
WITH runs_ AS (  -- import: the factory stages' run rows
    SELECT coalesce(batch_id, run_id) AS batch_id, stage, status, counts, started_at, finished_at,
           CASE stage WHEN 'ingest' THEN 1 WHEN 'synthesize' THEN 2 WHEN 'sample' THEN 3
                      WHEN 'generate' THEN 4 ELSE 5 END AS ord
    FROM runs WHERE stage IN ('ingest', 'synthesize', 'sample', 'generate', 'verify')
),
stages AS (  -- logic: seconds and items per (batch, stage) from its run row's timestamps and counts
    SELECT batch_id, stage, ord, status, started_at, finished_at,
           CAST(extract(epoch FROM finished_at - started_at) AS DOUBLE PRECISION) AS seconds,
           CAST(CASE stage WHEN 'ingest' THEN counts ->> 'docs_in' WHEN 'synthesize' THEN counts ->> 'tools'
                           ELSE counts ->> 'in' END AS BIGINT) AS items_in,
           CASE stage WHEN 'ingest' THEN CAST(counts ->> 'docs_in' AS BIGINT) - CAST(counts ->> 'docs_rejected' AS BIGINT)
                      WHEN 'synthesize' THEN CAST(counts ->> 'tools_accepted' AS BIGINT)
                      WHEN 'generate' THEN CAST(counts ->> 'tasks' AS BIGINT)
                      WHEN 'verify' THEN CAST(counts ->> 'verified' AS BIGINT)
                      ELSE CAST(counts ->> 'out' AS BIGINT) END AS items_out
    FROM runs_
),
batches AS (  -- logic: per batch: first start, wall seconds, seconds inside run rows, verified tasks
    SELECT batch_id,
           min(started_at) AS batch_started_at,
           CAST(extract(epoch FROM max(finished_at) - min(started_at)) AS DOUBLE PRECISION) AS wall,
           sum(seconds) AS stage_seconds,
           max(CASE WHEN stage = 'verify' THEN items_out END) AS verified,
           CASE WHEN bool_or(status = 'failed') THEN 'failed' WHEN bool_or(status = 'running') THEN 'running'
                ELSE 'completed' END AS status
    FROM stages GROUP BY batch_id
),
rows_ AS (  -- logic: the stage rows, then 'other' (wall - stage seconds) and 'total' (wall) per batch
    SELECT batch_id, ord, stage, status, seconds, items_in, items_out FROM stages
    UNION ALL
    SELECT batch_id, 6, 'other', status, greatest(wall - stage_seconds, 0), NULL, NULL FROM batches
    UNION ALL
    SELECT batch_id, 7, 'total', status, wall, NULL, NULL FROM batches
),
final AS (
    SELECT r.batch_id,                                              -- the factory batch (a lone stage run: its run_id)
           b.batch_started_at,                                      -- UTC: the batch's first stage start
           r.stage,                                                 -- ingest | synthesize | sample | generate | verify | other | total
           r.status,                                                -- the run's status; other / total: failed if a stage failed
           round(CAST(r.seconds AS numeric), 3)::double precision AS seconds,                          -- wall seconds (other: outside the run rows; total: first start -> last finish)
           CASE WHEN b.wall > 0 THEN round(CAST(r.seconds / b.wall AS numeric), 3)::double precision END AS share,  -- seconds / the batch's total
           r.items_in,                                              -- items the stage considered (definitions above)
           r.items_out,                                             -- items it passed on
           CASE WHEN r.items_in > 0 THEN round(CAST(1000 * r.seconds / r.items_in AS numeric), 3)::double precision END AS ms_per_item,  -- wall ms per item in
           b.verified,                                              -- the batch's verified tasks (its verify run's count)
           CASE WHEN b.verified > 0 THEN round(CAST(r.seconds / b.verified AS numeric), 4)::double precision END AS seconds_per_verified_task  -- this row's seconds / verified (the stage rows and other add up to total)
    FROM rows_ r JOIN batches b USING (batch_id)
    ORDER BY b.batch_started_at, r.batch_id, r.ord
)
SELECT * FROM final;
