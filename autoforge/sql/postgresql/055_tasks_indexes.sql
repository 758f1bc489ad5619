-- PostgreSQL version of sql/055_tasks_indexes.sql (DuckDB applies sql/055_tasks_indexes.sql: no index).
-- Without these, every read of v_curated_tasks scans the whole tasks heap (initial and gold state JSON
-- inline: ~5 GB at 1M tasks): 3-7 s per curated-task query in benchmarks/query_scale.py.
-- The trainer's and the README's reads of v_curated_tasks (split and difficulty filters, counts per
-- environment, the factory summary) as index-only scans over the verified tasks:
CREATE INDEX IF NOT EXISTS tasks_curated ON tasks (split, n_tool_calls, n_reasoning_nodes, task_id)
    INCLUDE (env_id, n_requirements, dag_depth) WHERE status = 'verified';
-- One environment's tasks (evaluation with --env, the generate and verify stages' loads):
CREATE INDEX IF NOT EXISTS tasks_env ON tasks (env_id, status);
