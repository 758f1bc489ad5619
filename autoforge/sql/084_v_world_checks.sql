-- Stages 2 and 5 (issue 32): world checks per environment (rows of world_checks). The sample
-- state's findings after synthesis (sample_*), and over its tasks: tasks with findings, those
-- rejected, verified tasks holding a finding of a kind that rejects (0 unless a row predates a
-- re-check), findings per kind (tasks_*). A new finding kind (domain.world_checks.FINDING_KINDS)
-- needs a new version of this view.
CREATE OR REPLACE VIEW v_world_checks AS
WITH findings_ AS (                                -- import: every world-check row
    SELECT env_id, task_id, kind, rejects FROM world_checks
),
tasks_ AS (                                        -- import: task statuses
    SELECT task_id, env_id, status FROM tasks
),
sample_ AS (                                       -- the sample state's findings per kind
    SELECT env_id,
           count(*) AS n,
           count(*) FILTER (WHERE kind = 'dangling_reference') AS dangling_reference,
           count(*) FILTER (WHERE kind = 'nested_reference') AS nested_reference,
           count(*) FILTER (WHERE kind = 'placeholder') AS placeholder,
           count(*) FILTER (WHERE kind = 'empty_container') AS empty_container,
           count(*) FILTER (WHERE kind = 'type_mismatch') AS type_mismatch,
           count(*) FILTER (WHERE kind = 'format_mismatch') AS format_mismatch
    FROM findings_ WHERE task_id IS NULL GROUP BY env_id
),
task_findings_ AS (                                -- the tasks' findings per kind
    SELECT f.env_id,
           count(*) AS n,
           count(DISTINCT f.task_id) AS n_tasks,
           count(DISTINCT f.task_id) FILTER (WHERE t.status = 'rejected') AS n_rejected,
           count(DISTINCT f.task_id) FILTER (WHERE t.status = 'verified' AND f.rejects) AS n_verified,
           count(*) FILTER (WHERE f.kind = 'dangling_reference') AS dangling_reference,
           count(*) FILTER (WHERE f.kind = 'nested_reference') AS nested_reference,
           count(*) FILTER (WHERE f.kind = 'placeholder') AS placeholder,
           count(*) FILTER (WHERE f.kind = 'empty_container') AS empty_container,
           count(*) FILTER (WHERE f.kind = 'type_mismatch') AS type_mismatch,
           count(*) FILTER (WHERE f.kind = 'format_mismatch') AS format_mismatch,
           count(*) FILTER (WHERE f.kind = 'write_outside_effect') AS write_outside_effect
    FROM findings_ f LEFT JOIN tasks_ t ON t.task_id = f.task_id
    WHERE f.task_id IS NOT NULL GROUP BY f.env_id
)
SELECT
    e.env_id,                                                              -- the environment
    e.name,                                                                -- environment name (= tool set name)
    e.status,                                                              -- ready | partial | failed (findings never discard it)
    coalesce(s.n, 0) AS sample_findings,                                   -- findings in its sample state
    coalesce(s.dangling_reference, 0) AS sample_dangling_reference,        -- reference fields / id lists naming a missing record
    coalesce(s.nested_reference, 0) AS sample_nested_reference,            -- ids inside nested objects naming a missing record
    coalesce(s.placeholder, 0) AS sample_placeholder,                      -- documentation hints instead of values
    coalesce(s.empty_container, 0) AS sample_empty_container,              -- empty objects / lists where content is required
    coalesce(s.type_mismatch, 0) AS sample_type_mismatch,                  -- values not of their declared JSON type, ids not their key
    coalesce(s.format_mismatch, 0) AS sample_format_mismatch,              -- values outside their documented enum / format / pattern
    coalesce(k.n_tasks, 0) AS tasks_with_findings,                         -- checked tasks with any finding
    coalesce(k.n_rejected, 0) AS rejected_with_findings,                   -- of those, rejected (by `world` or another check)
    coalesce(k.n_verified, 0) AS verified_with_rejecting_findings,         -- verified tasks with a finding of a kind that rejects (0 when consistent)
    coalesce(k.n, 0) AS task_findings,                                     -- findings over its tasks
    coalesce(k.dangling_reference, 0) AS tasks_dangling_reference,         -- in initial states (rejects)
    coalesce(k.nested_reference, 0) AS tasks_nested_reference,             -- in initial states (rejects)
    coalesce(k.placeholder, 0) AS tasks_placeholder,                       -- in initial states and gold arguments (rejects)
    coalesce(k.empty_container, 0) AS tasks_empty_container,               -- in initial states and gold arguments (rejects)
    coalesce(k.type_mismatch, 0) AS tasks_type_mismatch,                   -- in initial states and gold arguments (rejects)
    coalesce(k.format_mismatch, 0) AS tasks_format_mismatch,               -- in initial states (rejects)
    coalesce(k.write_outside_effect, 0) AS tasks_write_outside_effect      -- gold writes changing what their docs do not name (rejects)
FROM environments e
LEFT JOIN sample_ s ON s.env_id = e.env_id
LEFT JOIN task_findings_ k ON k.env_id = e.env_id;
