-- Every stage, per environment: what each environment yielded at each stage, and when it yields no
-- verified task, why (the first stage that came up empty, with its most frequent drop reasons and
-- messages). `autoforge factory` prints it and exits non-zero when an environment it was asked for
-- yields nothing.
CREATE OR REPLACE VIEW v_environment_funnel AS
WITH environments_ AS (                            -- import: the environments and their tool sets
    SELECT e.env_id, e.name, e.n_tools, e.n_tools_accepted, coalesce(t.kind, 'stateful') AS kind
    FROM environments e LEFT JOIN toolsets t ON t.toolset_id = e.toolset_id
),
graphs AS (                                        -- import: tool-graph edges (the largest graph stored)
    SELECT env_id, max(json_array_length(edges)) AS n_edges FROM tool_graphs GROUP BY env_id
),
sequences AS (                                     -- import: sampled tool sequences and the start rules they used
    SELECT env_id, count(*) AS n_sequences, string_agg(DISTINCT start_rule, ', ' ORDER BY start_rule) AS start_rules
    FROM tool_sequences GROUP BY env_id
),
dags AS (                                          -- import: task DAGs
    SELECT env_id, count(*) AS n_dags FROM task_dags GROUP BY env_id
),
tasks_ AS (                                        -- import: generated and verified tasks
    SELECT env_id, count(*) AS n_generated, count(*) FILTER (WHERE status = 'verified') AS n_verified
    FROM tasks GROUP BY env_id
),
owners AS (                                        -- logic: every id a rejection can name, with its environment
    SELECT DISTINCT item, env_id FROM (
        SELECT env_id AS item, env_id FROM environments
        UNION ALL SELECT seq_id, env_id FROM tool_sequences
        UNION ALL SELECT dag_id, env_id FROM task_dags
        UNION ALL SELECT task_id, env_id FROM tasks
        UNION ALL SELECT tool_id, env_id FROM tool_code
    )
),
drops AS (                                         -- logic: drops per environment, stage and reason
    SELECT o.env_id, r.stage, r.reason, count(*) AS n, min(r.detail) AS example
    FROM rejections r JOIN owners o ON o.item = split_part(r.item_id, '#', 1)
    GROUP BY o.env_id, r.stage, r.reason
),
ranked AS (                                        -- logic: reasons ranked within an environment and stage
    SELECT *, row_number() OVER (PARTITION BY env_id, stage ORDER BY n DESC, reason) AS rk FROM drops
),
reasons AS (                                       -- logic: the three most frequent reasons per stage, with one message
    SELECT env_id, stage,
           string_agg(CASE WHEN rk <= 3 THEN reason || ' (' || n || ')' END, ', ' ORDER BY rk) AS top,
           max(CASE WHEN rk = 1 THEN left(example, 160) END) AS message
    FROM ranked GROUP BY env_id, stage
),
joined AS (
    SELECT e.env_id, e.name, e.kind, e.n_tools, e.n_tools_accepted,
           coalesce(g.n_edges, 0) AS n_edges, coalesce(s.n_sequences, 0) AS n_sequences, s.start_rules,
           coalesce(d.n_dags, 0) AS n_dags, coalesce(t.n_generated, 0) AS n_generated,
           coalesce(t.n_verified, 0) AS n_verified,
           rs.top AS sample_drops, rg.top AS generate_drops, rg.message AS generate_message,
           rv.top AS verify_drops, rv.message AS verify_message
    FROM environments_ e
    LEFT JOIN graphs g ON g.env_id = e.env_id
    LEFT JOIN sequences s ON s.env_id = e.env_id
    LEFT JOIN dags d ON d.env_id = e.env_id
    LEFT JOIN tasks_ t ON t.env_id = e.env_id
    LEFT JOIN reasons rs ON rs.env_id = e.env_id AND rs.stage = 'sample'
    LEFT JOIN reasons rg ON rg.env_id = e.env_id AND rg.stage = 'generate'
    LEFT JOIN reasons rv ON rv.env_id = e.env_id AND rv.stage = 'verify'
)
SELECT
    env_id,                                        -- the environment
    name,                                          -- environment name (= tool set name)
    kind,                                          -- stateful | stateless (no tool changes state)
    n_tools_accepted,                              -- tools whose code was accepted
    n_edges,                                       -- tool-graph edges (an output of one tool feeds another)
    n_sequences,                                   -- sampled tool sequences (walks and merges)
    start_rules,                                   -- where the walks started: lookup | read | entry | any
    n_dags,                                        -- task DAGs built from them
    n_generated,                                   -- tasks generated
    n_verified,                                    -- tasks verified (the curated corpus)
    sample_drops,                                  -- top sample-stage drop reasons 'reason (n), ...'
    generate_drops,                                -- top generate-stage drop reasons
    verify_drops,                                  -- top verify-stage drop reasons
    CASE                                           -- why the environment yields no verified task (NULL: it does)
        WHEN n_verified > 0 THEN NULL
        WHEN n_tools_accepted = 0 THEN 'synthesize: no tool code was accepted'
        WHEN kind = 'stateless' AND n_sequences = 0
            THEN 'stateless tool set: no tool changes state, so no task has a state change to verify'
        WHEN n_edges = 0 THEN 'sample: the tool graph has no edges (no output of one tool binds to an input of another)'
        WHEN n_sequences = 0 THEN 'sample: no walk of the allowed lengths ends in a write (start rule and lengths)'
        WHEN n_dags = 0 THEN 'sample: no sequence became a DAG: ' || coalesce(sample_drops, '-')
        WHEN n_generated = 0 THEN 'generate: every instantiation failed: ' || coalesce(generate_drops, '-')
                                  || coalesce('; e.g. ' || generate_message, '')
        ELSE 'verify: every task failed a check: ' || coalesce(verify_drops, '-') || coalesce('; e.g. ' || verify_message, '')
    END AS why_empty
FROM joined
