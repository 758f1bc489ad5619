-- Issue 33: v_rule_coverage and v_rule_summary (sql/089) with which rules are *mechanically checkable*: a
-- rule some call or record of its tool set could show kept or broken. Every enforced rule is; a rule not
-- enforced is unless its why starts 'outside the tools:' (the sentence names no tool, argument, record
-- field or status of the tool set: autoforge.domain.policy_world.named_in, rule_kinds.OUTSIDE). Otherwise
-- the views of sql/089 as they were. benchmarks/policy.py reads the share enforced of the checkable ones.
CREATE OR REPLACE VIEW v_rule_coverage AS
WITH rules_ AS (                                   -- import: every rule read or listed
    SELECT rule_id, env_id, tool, kind, text, field, source, source_offset, tools, enforcement, why, probe, probe_detail,
           (enforcement <> 'not enforced' OR coalesce(why, '') NOT LIKE 'outside the tools:%') AS checkable
    FROM tool_rules
),
environments_ AS (                                 -- import: environment names and tool sets
    SELECT env_id, name, toolset_id FROM environments
),
policies_ AS (                                     -- import: the policy document of each (tool set, source)
    SELECT toolset_id, source, min(policy_id) AS policy_id FROM policy_docs GROUP BY toolset_id, source
),
task_rules_ AS (                                   -- import: the rules each verified task exercises
    SELECT task_id, kind, unnest(json_extract_string(rules, '$[*]')) AS rule_id
    FROM tasks WHERE status = 'verified'
),
tasks_ AS (                                        -- logic: verified tasks per rule
    SELECT rule_id, count(DISTINCT task_id) AS n_tasks,
           count(DISTINCT task_id) FILTER (WHERE kind = 'boundary') AS n_boundary
    FROM task_rules_ GROUP BY rule_id
),
breaks_ AS (                                       -- logic: episodes per rule they broke
    SELECT rule_id, count(DISTINCT episode_id) AS n_episodes
    FROM (SELECT episode_id, unnest(json_extract_string(rule_breaks, '$[*]')) AS rule_id FROM episodes) b
    GROUP BY rule_id
)
SELECT
    r.env_id,                                      -- the environment that enforces (or not) the rule
    e.name AS env_name,                            -- environment name (= tool set name)
    r.rule_id,                                     -- tool_rules.rule_id (what tasks.rules / episodes.rule_breaks hold)
    r.kind,                                        -- what it says (a name in domain.rule_kinds.RULE_KINDS)
    r.source,                                      -- 'tool' (a tool's own prose) or the policy document it was read from
    p.policy_id,                                   -- that document's policy_docs row (NULL for 'tool' or a replaced document)
    r.source_offset,                               -- character offset of the sentence in the document
    r.text,                                        -- the sentence
    r.tool,                                        -- the first tool it binds ('' for none)
    r.tools,                                       -- every tool it binds (JSON list of names)
    r.field,                                       -- the record field or parameter it constrains
    r.enforcement,                                 -- code | runtime | judged | not enforced
    r.why,                                         -- not enforced: why
    r.probe,                                       -- passed | failed | none: the synthesis probe
    r.probe_detail,                                -- what the probe saw
    r.checkable,                                   -- a call or record of the tool set could show it kept or broken
    coalesce(t.n_tasks, 0) AS tasks_exercising,    -- verified tasks whose rules list it
    coalesce(t.n_boundary, 0) AS boundary_tasks,   -- of those, boundary tasks (the user asks for what it forbids)
    coalesce(b.n_episodes, 0) AS episodes_broken   -- episodes whose rule_breaks list it
FROM rules_ r
LEFT JOIN environments_ e ON e.env_id = r.env_id
LEFT JOIN policies_ p ON p.toolset_id = e.toolset_id AND p.source = r.source
LEFT JOIN tasks_ t ON t.rule_id = r.rule_id
LEFT JOIN breaks_ b ON b.rule_id = r.rule_id;
CREATE OR REPLACE VIEW v_rule_summary AS
WITH environments_ AS (                            -- import: the environments as synthesized
    SELECT env_id, name, toolset_id FROM environments
),
rules_ AS (                                        -- import: every rule read or listed
    SELECT env_id, kind, source, enforcement, probe,
           (enforcement <> 'not enforced' OR coalesce(why, '') NOT LIKE 'outside the tools:%') AS checkable
    FROM tool_rules
),
rule_stats AS (                                    -- logic: per-environment counts by source, enforcement and probe
    SELECT
        env_id,
        count(*) AS n_rules,
        count(*) FILTER (WHERE source <> 'tool') AS n_from_policy,
        count(*) FILTER (WHERE source = 'tool') AS n_from_tools,
        count(*) FILTER (WHERE kind <> 'unparsed') AS n_read,
        count(*) FILTER (WHERE kind = 'unparsed') AS n_unparsed,
        count(*) FILTER (WHERE enforcement = 'runtime') AS n_runtime,
        count(*) FILTER (WHERE enforcement = 'judged') AS n_judged,
        count(*) FILTER (WHERE enforcement = 'code') AS n_code,
        count(*) FILTER (WHERE enforcement = 'not enforced') AS n_not_enforced,
        count(*) FILTER (WHERE probe = 'passed') AS n_probe_passed,
        count(*) FILTER (WHERE probe = 'failed') AS n_probe_failed,
        count(*) FILTER (WHERE checkable) AS n_checkable,
        count(*) FILTER (WHERE checkable AND source <> 'tool') AS n_checkable_policy,
        count(*) FILTER (WHERE checkable AND source <> 'tool' AND enforcement IN ('runtime', 'judged')
                         AND probe <> 'failed') AS n_checkable_policy_enforced
    FROM rules_ GROUP BY env_id
),
policies_ AS (                                     -- import: policy documents per tool set
    SELECT toolset_id, count(*) AS n_docs FROM policy_docs GROUP BY toolset_id
),
tasks_ AS (                                        -- logic: verified tasks that exercise any rule
    SELECT env_id, count(*) AS n_tasks,
           count(*) FILTER (WHERE kind = 'boundary') AS n_boundary
    FROM tasks WHERE status = 'verified' AND json_array_length(rules) > 0 GROUP BY env_id
),
episodes_ AS (                                     -- logic: episodes that broke any rule
    SELECT env_id, count(*) AS n_episodes FROM episodes WHERE json_array_length(rule_breaks) > 0 GROUP BY env_id
)
SELECT
    e.env_id,                                                  -- the environment
    e.name,                                                    -- environment name (= tool set name)
    coalesce(p.n_docs, 0) AS policy_docs,                      -- policy documents of its tool set
    coalesce(s.n_rules, 0) AS n_rules,                         -- rules read or listed (every kind, every source)
    coalesce(s.n_from_policy, 0) AS n_from_policy,             -- of those, from policy documents
    coalesce(s.n_from_tools, 0) AS n_from_tools,               -- of those, from the tools' own prose
    coalesce(s.n_read, 0) AS n_read,                           -- read into a kind (not unparsed)
    coalesce(s.n_unparsed, 0) AS n_unparsed,                   -- rule-like sentences no form matched (listed, not enforced)
    coalesce(s.n_runtime, 0) AS n_runtime,                     -- enforced by a guard the rule engine checks
    coalesce(s.n_judged, 0) AS n_judged,                       -- checked over the conversation by the judge
    coalesce(s.n_code, 0) AS n_code,                           -- enforced by the tool's template code
    coalesce(s.n_not_enforced, 0) AS n_not_enforced,           -- listed with why, not enforced
    coalesce(s.n_probe_passed, 0) AS n_probe_passed,           -- enforced rules whose synthesis probe passed
    coalesce(s.n_probe_failed, 0) AS n_probe_failed,           -- enforced rules whose synthesis probe failed
    coalesce(s.n_checkable, 0) AS n_checkable,                 -- mechanically checkable (v_rule_coverage.checkable)
    coalesce(s.n_checkable_policy, 0) AS n_checkable_policy,   -- of those, from policy documents
    coalesce(s.n_checkable_policy_enforced, 0) AS n_checkable_policy_enforced,  -- of those, enforced (runtime / judged)
    coalesce(t.n_tasks, 0) AS tasks_with_rules,                -- verified tasks that exercise a rule
    coalesce(t.n_boundary, 0) AS boundary_tasks,               -- of those, boundary tasks
    coalesce(b.n_episodes, 0) AS episodes_breaking             -- episodes that broke a rule
FROM environments_ e
LEFT JOIN rule_stats s ON s.env_id = e.env_id
LEFT JOIN policies_ p ON p.toolset_id = e.toolset_id
LEFT JOIN tasks_ t ON t.env_id = e.env_id
LEFT JOIN episodes_ b ON b.env_id = e.env_id;
