-- Stage 5 (verify): each task's passed verification checks, kept on its row (issue 16: curated-task
-- queries at corpus scale; v_curated_tasks reads it from sql/054). v_curated_tasks counted them from verification_results on every read: a
-- GROUP BY over ten rows per task (10M rows at 1M tasks) before any filter applied. The warehouse
-- writer (autoforge.warehouse.store.write_records) recounts the tasks of every batch that writes
-- tasks or verification_results, in the same transaction; this file fills the column once.
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS n_checks_passed INTEGER;  -- verification checks passed (NULL: none recorded)
UPDATE tasks SET n_checks_passed = c.n
FROM (SELECT task_id, sum(CASE WHEN passed THEN 1 ELSE 0 END) AS n FROM verification_results GROUP BY task_id) c
WHERE c.task_id = tasks.task_id;
