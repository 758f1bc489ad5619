-- Stage 2 (synthesize): one row per environment with the acceptance checks that real
-- documentation needs: tool acceptance, whether the tool set has state at all, how many write
-- tools a read leads to in the tool graph, and how many stated rules the code enforces.
CREATE OR REPLACE VIEW v_environment_checks AS
WITH environments_ AS (                            -- import: the environments as synthesized
    SELECT env_id, name, toolset_id, status, n_tools, n_tools_accepted, n_write_tools, writes_unreachable, writes_standalone
    FROM environments
),
toolsets_ AS (                                     -- import: the tool sets (stateful | stateless)
    SELECT toolset_id, kind FROM toolsets
),
outputs_ AS (                                      -- import: accepted tools whose output schema was derived, not documented
    SELECT env_id, count(*) FILTER (WHERE output_schema_source = 'derived') AS n_outputs_derived
    FROM tool_code WHERE status = 'accepted' GROUP BY env_id
),
rules_ AS (                                        -- import: rule counts per environment
    SELECT env_id, n_rules, n_enforced, n_probe_passed, n_probe_failed, n_not_enforced FROM v_environment_rules
)
SELECT
    e.env_id,                                                        -- the environment
    e.name,                                                          -- environment name (= tool set name)
    coalesce(t.kind, 'stateful') AS kind,                            -- stateful | stateless (math, web search: no state change)
    e.status,                                                        -- ready | partial | failed
    e.n_tools_accepted || '/' || e.n_tools AS tools_accepted,        -- accepted / documented tools
    e.n_write_tools,                                                 -- accepted write tools
    e.n_write_tools - json_array_length(e.writes_unreachable) AS n_writes_reachable,  -- write tools a read leads to
    CASE WHEN e.n_write_tools = 0 THEN NULL
         ELSE round(1.0 - json_array_length(e.writes_unreachable) / e.n_write_tools, 3) END AS reachable_share,  -- share of write tools reachable (NULL: no writes)
    e.writes_unreachable,                                            -- write tools no read leads to
    e.n_write_tools - json_array_length(e.writes_unreachable) + json_array_length(e.writes_standalone)
        AS n_writes_usable,                                          -- reachable from a read, or needing no stored id (a task can start there)
    e.writes_standalone,                                             -- unreachable writes needing no stored id (create, login)
    coalesce(o.n_outputs_derived, 0) AS n_outputs_derived,           -- accepted tools whose output schema was derived from the state model
    coalesce(r.n_rules, 0) AS n_rules,                               -- rules the prose states (any kind)
    coalesce(r.n_enforced, 0) AS n_rules_enforced,                   -- rules the tool code enforces
    coalesce(r.n_probe_passed, 0) AS n_rules_probe_passed,           -- enforced rules whose probe passed
    coalesce(r.n_probe_failed, 0) AS n_rules_probe_failed,           -- enforced rules whose probe failed
    coalesce(r.n_not_enforced, 0) AS n_rules_not_enforced            -- rules listed but not enforced
FROM environments_ e
LEFT JOIN toolsets_ t ON t.toolset_id = e.toolset_id
LEFT JOIN rules_ r ON r.env_id = e.env_id
LEFT JOIN outputs_ o ON o.env_id = e.env_id
