-- Stage 5 (verify): each checked task's duplicate and blueprint keys on its row (issue 16: a factory
-- batch into a large warehouse). A batch's verify needs the keys of every task verified before it (no
-- duplicates across batches, the blueprint cap counts earlier tasks). It derived them from each stored
-- task's states and DAG, so its memory grew with the warehouse (~2.2 GB per 12k stored tasks); now it
-- reads these two strings. Rows written before this file hold NULL and are derived once more, as before.
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS duplicate_key VARCHAR;  -- tasks.generate.duplicate_key: DAG shape + state change (answer tasks: + facts, answer)
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS blueprint_key VARCHAR;  -- tasks.generate.blueprint_key: environment + DAG shape
