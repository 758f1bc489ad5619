-- Stage 5 (verify): how good each environment's verified tasks are, not only how many: variety
-- (distinct gold tool sequences, write tools used of those a read reaches), depth (median calls,
-- share with a reasoning node), the start rule sampling used, and what share of the candidates
-- each quality check dropped. `autoforge factory` prints it; benchmarks/realdocs.py too.
CREATE OR REPLACE VIEW v_environment_quality AS
WITH environments_ AS (                            -- import: environments with their linkage check
    SELECT env_id, name, n_write_tools, n_write_tools - json_array_length(writes_unreachable) AS n_writes_reachable
    FROM environments
),
verified AS (                                      -- import: verified tasks and their gold tool sequences
    SELECT env_id, task_id, n_tool_calls, n_reasoning_nodes,
           json_extract_string(gold_calls, '$[*].name') AS tools_called
    FROM tasks WHERE status = 'verified'
),
writes AS (                                        -- import: accepted write tools per environment
    SELECT env_id, name FROM tool_code WHERE status = 'accepted' AND effect = 'write'
),
used AS (                                          -- logic: write tools the verified tasks call
    SELECT v.env_id, count(DISTINCT w.name) AS n_writes_used
    FROM (SELECT env_id, unnest(tools_called) AS tool FROM verified) v
    JOIN writes w ON w.env_id = v.env_id AND w.name = v.tool
    GROUP BY v.env_id
),
tasks_ AS (                                        -- logic: counts over verified tasks
    SELECT env_id, count(*) AS n_verified, count(DISTINCT tools_called) AS n_sequences,
           median(n_tool_calls) AS median_calls,
           avg(CASE WHEN n_reasoning_nodes > 0 THEN 1.0 ELSE 0.0 END) AS reasoning_share
    FROM verified GROUP BY env_id
),
starts AS (                                        -- import: the start rules sampling used
    SELECT env_id, string_agg(DISTINCT start_rule, ', ' ORDER BY start_rule) AS start_rules
    FROM tool_sequences GROUP BY env_id
),
owners AS (                                        -- logic: the environment of every id a generate / verify drop names
    SELECT DISTINCT item, env_id FROM (
        SELECT dag_id AS item, env_id FROM task_dags UNION ALL SELECT task_id, env_id FROM tasks
    )
),
drops AS (                                         -- logic: candidates and quality drops per environment
    SELECT o.env_id, count(*) AS n_drops,
           count(*) FILTER (WHERE r.reason IN ('unobservable_write', 'writes_observable')) AS n_unobservable,
           count(*) FILTER (WHERE r.reason IN ('out_of_domain', 'args_in_domain')) AS n_out_of_domain,
           count(*) FILTER (WHERE r.reason = 'near_duplicate') AS n_near_duplicate,
           count(*) FILTER (WHERE r.reason IN ('duplicate', 'not_duplicate')) AS n_duplicate
    FROM rejections r JOIN owners o ON o.item = split_part(r.item_id, '#', 1)
    WHERE r.stage IN ('generate', 'verify')
    GROUP BY o.env_id
),
generated AS (                                     -- import: every task made (verified or not)
    SELECT env_id, count(*) AS n_tasks FROM tasks GROUP BY env_id
),
joined AS (
    SELECT e.env_id, e.name, coalesce(t.n_verified, 0) AS n_verified, coalesce(t.n_sequences, 0) AS n_sequences,
           coalesce(u.n_writes_used, 0) AS n_writes_used, e.n_writes_reachable, t.median_calls, t.reasoning_share,
           s.start_rules, coalesce(g.n_tasks, 0) + coalesce(d.n_drops, 0) AS n_candidates,
           coalesce(d.n_unobservable, 0) AS n_unobservable, coalesce(d.n_out_of_domain, 0) AS n_out_of_domain,
           coalesce(d.n_near_duplicate, 0) AS n_near_duplicate, coalesce(d.n_duplicate, 0) AS n_duplicate
    FROM environments_ e
    LEFT JOIN tasks_ t ON t.env_id = e.env_id
    LEFT JOIN used u ON u.env_id = e.env_id
    LEFT JOIN starts s ON s.env_id = e.env_id
    LEFT JOIN drops d ON d.env_id = e.env_id
    LEFT JOIN generated g ON g.env_id = e.env_id
)
SELECT
    env_id,                                                          -- the environment
    name,                                                            -- environment name (= tool set name)
    n_verified,                                                      -- verified tasks
    n_sequences,                                                     -- distinct gold tool sequences among them
    CASE WHEN n_verified = 0 THEN NULL ELSE round(n_sequences / n_verified, 3) END AS sequence_share,  -- distinct sequences per task
    n_writes_used,                                                   -- write tools the verified tasks call
    n_writes_reachable,                                              -- write tools a read reaches in the tool graph
    CASE WHEN n_writes_reachable = 0 THEN NULL
         ELSE round(n_writes_used / n_writes_reachable, 3) END AS writes_used_share,  -- used / reachable
    median_calls,                                                    -- median gold tool calls per verified task
    round(reasoning_share, 3) AS reasoning_share,                    -- share of verified tasks with a reasoning node
    start_rules,                                                     -- where sampling started walks: lookup | read | entry | any
    n_candidates,                                                    -- instantiation attempts (tasks made + generate drops + verify drops)
    CASE WHEN n_candidates = 0 THEN NULL ELSE round(n_unobservable / n_candidates, 3) END AS dropped_unobservable,  -- share dropped: a gold write not visible in S*
    CASE WHEN n_candidates = 0 THEN NULL ELSE round(n_out_of_domain / n_candidates, 3) END AS dropped_out_of_domain,  -- share dropped: an argument outside its domain
    CASE WHEN n_candidates = 0 THEN NULL ELSE round(n_near_duplicate / n_candidates, 3) END AS dropped_near_duplicate,  -- share dropped: blueprint cap reached
    CASE WHEN n_candidates = 0 THEN NULL ELSE round(n_duplicate / n_candidates, 3) END AS dropped_duplicate  -- share dropped: an identical task
FROM joined
