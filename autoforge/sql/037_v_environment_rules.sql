-- Stage 2 (synthesize): per environment, the rules its tools' prose states and how many the code enforces.
CREATE OR REPLACE VIEW v_environment_rules AS
WITH environments_ AS (                            -- import: the environments as synthesized
    SELECT env_id, name FROM environments
),
tool_rules_ AS (                                   -- import: every rule read from the prose
    SELECT env_id, kind, enforcement, probe FROM tool_rules
),
rule_stats AS (                                    -- logic: per-environment counts by kind, enforcement and probe
    SELECT
        env_id,
        count(*)                                              AS n_rules,
        count(*) FILTER (WHERE enforcement = 'code')          AS n_enforced,
        count(*) FILTER (WHERE probe = 'passed')              AS n_probe_passed,
        count(*) FILTER (WHERE probe = 'failed')              AS n_probe_failed,
        count(*) FILTER (WHERE enforcement = 'not enforced')  AS n_not_enforced,
        count(*) FILTER (WHERE kind = 'unparsed')             AS n_unparsed
    FROM tool_rules_
    GROUP BY env_id
)
SELECT
    e.env_id,                                      -- the environment
    e.name,                                        -- environment name (= tool set name)
    coalesce(s.n_rules, 0) AS n_rules,             -- rules found in the tools' prose (every kind)
    coalesce(s.n_enforced, 0) AS n_enforced,       -- rules the tool code enforces
    coalesce(s.n_probe_passed, 0) AS n_probe_passed,  -- enforced rules whose synthesis probe passed
    coalesce(s.n_probe_failed, 0) AS n_probe_failed,  -- enforced rules whose synthesis probe failed
    coalesce(s.n_not_enforced, 0) AS n_not_enforced,  -- rules listed but not enforced (constraints, unparsed ...)
    coalesce(s.n_unparsed, 0) AS n_unparsed        -- rule-like sentences nothing could read
FROM environments_ e
LEFT JOIN rule_stats s ON s.env_id = e.env_id
