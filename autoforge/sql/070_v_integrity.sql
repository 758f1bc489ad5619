-- Warehouse integrity: one row per violation, empty when the warehouse is consistent (issue 7).
-- Checked after crashes and concurrent factory runs: no duplicate keys, every reference resolves,
-- every row's run exists, a verified task passed every check it has and has at least one.
-- `autoforge sql "SELECT * FROM v_integrity"` should print no rows.
CREATE OR REPLACE VIEW v_integrity AS
WITH duplicate_keys AS (  -- logic: a primary key held by more than one row
    SELECT 'duplicate_key' AS violation, 'runs' AS table_name, run_id AS item_id, count(*) AS n FROM runs GROUP BY run_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tool_docs', doc_id, count(*) FROM tool_docs GROUP BY doc_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tool_specs', tool_id, count(*) FROM tool_specs GROUP BY tool_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'toolsets', toolset_id, count(*) FROM toolsets GROUP BY toolset_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'environments', env_id, count(*) FROM environments GROUP BY env_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tool_code', code_id, count(*) FROM tool_code GROUP BY code_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tool_graphs', graph_id, count(*) FROM tool_graphs GROUP BY graph_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tool_sequences', seq_id, count(*) FROM tool_sequences GROUP BY seq_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'task_dags', dag_id, count(*) FROM task_dags GROUP BY dag_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'tasks', task_id, count(*) FROM tasks GROUP BY task_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'verification_results', task_id || '/' || "check", count(*)
        FROM verification_results GROUP BY task_id, "check" HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'rejections', rejection_id, count(*) FROM rejections GROUP BY rejection_id HAVING count(*) > 1
    UNION ALL SELECT 'duplicate_key', 'episodes', episode_id, count(*) FROM episodes GROUP BY episode_id HAVING count(*) > 1
),
dangling AS (  -- logic: a reference to a row that does not exist
    SELECT 'missing_tool_doc' AS violation, 'tool_specs' AS table_name, s.tool_id AS item_id, s.doc_id AS missing
        FROM tool_specs s WHERE s.doc_id NOT IN (SELECT doc_id FROM tool_docs)
    UNION ALL SELECT 'missing_toolset', 'environments', e.env_id, e.toolset_id
        FROM environments e WHERE e.toolset_id NOT IN (SELECT toolset_id FROM toolsets)
    UNION ALL SELECT 'missing_environment', 'tool_code', c.code_id, c.env_id
        FROM tool_code c WHERE c.env_id NOT IN (SELECT env_id FROM environments)
    UNION ALL SELECT 'missing_tool_spec', 'tool_code', c.code_id, c.tool_id
        FROM tool_code c WHERE c.tool_id NOT IN (SELECT tool_id FROM tool_specs)
    UNION ALL SELECT 'missing_environment', 'tool_graphs', g.graph_id, g.env_id
        FROM tool_graphs g WHERE g.env_id NOT IN (SELECT env_id FROM environments)
    UNION ALL SELECT 'missing_environment', 'tool_sequences', q.seq_id, q.env_id
        FROM tool_sequences q WHERE q.env_id NOT IN (SELECT env_id FROM environments)
    UNION ALL SELECT 'missing_environment', 'task_dags', d.dag_id, d.env_id
        FROM task_dags d WHERE d.env_id NOT IN (SELECT env_id FROM environments)
    UNION ALL SELECT 'missing_sequence', 'task_dags', d.dag_id, d.seq_id
        FROM task_dags d WHERE d.seq_id IS NOT NULL AND d.seq_id NOT IN (SELECT seq_id FROM tool_sequences)
    UNION ALL SELECT 'missing_environment', 'tasks', t.task_id, t.env_id
        FROM tasks t WHERE t.env_id NOT IN (SELECT env_id FROM environments)
    UNION ALL SELECT 'missing_dag', 'tasks', t.task_id, t.dag_id
        FROM tasks t WHERE t.dag_id NOT IN (SELECT dag_id FROM task_dags)
    UNION ALL SELECT 'missing_task', 'verification_results', v.task_id || '/' || v."check", v.task_id
        FROM verification_results v WHERE v.task_id NOT IN (SELECT task_id FROM tasks)
    UNION ALL SELECT 'missing_task', 'episodes', p.episode_id, p.task_id
        FROM episodes p WHERE p.task_id NOT IN (SELECT task_id FROM tasks)
),
row_runs AS (  -- import: every factory row's run (lineage), per table
    SELECT 'tool_docs' AS table_name, doc_id AS item_id, run_id FROM tool_docs
    UNION ALL SELECT 'tool_specs', tool_id, run_id FROM tool_specs
    UNION ALL SELECT 'toolsets', toolset_id, run_id FROM toolsets
    UNION ALL SELECT 'environments', env_id, run_id FROM environments
    UNION ALL SELECT 'tool_code', code_id, run_id FROM tool_code
    UNION ALL SELECT 'tool_graphs', graph_id, run_id FROM tool_graphs
    UNION ALL SELECT 'tool_sequences', seq_id, run_id FROM tool_sequences
    UNION ALL SELECT 'task_dags', dag_id, run_id FROM task_dags
    UNION ALL SELECT 'tasks', task_id, run_id FROM tasks
    UNION ALL SELECT 'verification_results', task_id || '/' || "check", run_id FROM verification_results
    UNION ALL SELECT 'rejections', rejection_id, run_id FROM rejections
),
missing_runs AS (  -- logic: a row whose run was never recorded (a write that lost its run row)
    SELECT 'missing_run' AS violation, r.table_name, r.item_id, r.run_id AS missing
    FROM row_runs r WHERE r.run_id IS NOT NULL AND r.run_id NOT IN (SELECT run_id FROM runs)
),
check_counts AS (  -- import: verification rows per task
    SELECT task_id, count(*) AS n_checks, count(*) FILTER (WHERE NOT passed) AS n_failed
    FROM verification_results GROUP BY task_id
),
bad_verified AS (  -- logic: a task marked verified that failed a check, or was never checked
    SELECT CASE WHEN c.task_id IS NULL THEN 'verified_without_checks' ELSE 'verified_with_failed_check' END AS violation,
           'tasks' AS table_name, t.task_id AS item_id,
           CASE WHEN c.task_id IS NULL THEN NULL ELSE c.n_failed || ' of ' || c.n_checks || ' checks failed' END AS missing
    FROM tasks t LEFT JOIN check_counts c ON c.task_id = t.task_id
    WHERE t.status = 'verified' AND (c.task_id IS NULL OR c.n_failed > 0)
)
SELECT violation,                          -- what is wrong: duplicate_key, missing_<thing>, verified_...
       table_name,                         -- the table holding the bad row
       item_id,                            -- the bad row's key
       CAST(n AS VARCHAR) || ' rows' AS detail  -- how many rows share the key
FROM duplicate_keys
UNION ALL SELECT violation, table_name, item_id, 'refers to ' || coalesce(missing, 'NULL') FROM dangling
UNION ALL SELECT violation, table_name, item_id, 'run ' || missing || ' not in runs' FROM missing_runs
UNION ALL SELECT violation, table_name, item_id, missing FROM bad_verified;
