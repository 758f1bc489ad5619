-- PostgreSQL version of sql/042_v_stage_funnel.sql (applied there instead of it; DuckDB applies sql/042_v_stage_funnel.sql as it is).
-- sum(n) of counts is cast to bigint: an integer, as DuckDB's HUGEINT reads in Python (PostgreSQL's sum(bigint) is numeric).
-- Every stage: items in, items out and the top rejection reasons: the factory's yield at a glance (issue 4).
-- in = out + recorded drops for generate; the other stages count their own tables.
DROP VIEW IF EXISTS v_stage_funnel;
CREATE VIEW v_stage_funnel AS
WITH rej AS (  -- import: drops per stage and reason
    SELECT stage, reason, count(*) AS n FROM rejections GROUP BY stage, reason
),
ranked AS (  -- logic: rank reasons within a stage
    SELECT stage, reason, n, row_number() OVER (PARTITION BY stage ORDER BY n DESC, reason) AS rk FROM rej
),
reasons AS (  -- logic: the three most frequent reasons, and all drops
    SELECT stage,
           sum(n)::bigint AS n_rejected,
           string_agg(CASE WHEN rk <= 3 THEN reason || ' (' || n || ')' END, ', ' ORDER BY rk) AS top_reasons
    FROM ranked GROUP BY stage
),
counts AS (  -- logic: items in / out per stage from the stage tables
    SELECT 1 AS ord, 'ingest' AS stage, (SELECT count(*) FROM tool_docs) AS items_in,
           (SELECT count(*) FROM tool_docs WHERE status = 'accepted') AS items_out
    UNION ALL
    SELECT 2, 'synthesize', (SELECT count(*) FROM tool_code), (SELECT count(*) FROM tool_code WHERE status = 'accepted')
    UNION ALL
    SELECT 3, 'sample', (SELECT count(*) FROM tool_sequences), (SELECT count(DISTINCT seq_id) FROM task_dags)
    UNION ALL
    SELECT 4, 'generate',
           (SELECT count(*) FROM tasks) + (SELECT count(*) FROM rejections WHERE stage = 'generate'),
           (SELECT count(*) FROM tasks)
    UNION ALL
    SELECT 5, 'verify', (SELECT count(*) FROM tasks WHERE status IN ('verified', 'rejected')),
           (SELECT count(*) FROM tasks WHERE status = 'verified')
),
final AS (
    SELECT c.stage,                                   -- ingest | synthesize | sample | generate | verify
           c.items_in,                                -- items the stage considered
           c.items_out,                               -- items it passed on
           coalesce(r.n_rejected, 0) AS n_rejected,   -- drops recorded in rejections
           r.top_reasons                              -- 'reason (count), ...' for the three most frequent
    FROM counts c LEFT JOIN reasons r USING (stage)
    ORDER BY c.ord
)
SELECT * FROM final;
