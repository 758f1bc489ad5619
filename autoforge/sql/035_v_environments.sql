-- Stage 2 (synthesize): one row per environment with its tool acceptance, backend and rejections.
-- Contract (issue 3): env_id, name, status, n_tools, n_tools_accepted.
CREATE OR REPLACE VIEW v_environments AS
WITH environments_ AS (                            -- import: the environments as synthesized
    SELECT env_id, name, toolset_id, backend, status, n_tools, n_tools_accepted, reason, state_schema, run_id
    FROM environments
),
tool_code_ AS (                                    -- import: every tool's code and check outcome
    SELECT env_id, status, effect, kind, attempts
    FROM tool_code
),
tool_stats AS (                                    -- logic: per-environment tool counts by outcome and effect
    SELECT
        env_id,
        count(*) FILTER (WHERE status = 'accepted' AND effect = 'read')  AS n_read_tools,
        count(*) FILTER (WHERE status = 'accepted' AND effect = 'write') AS n_write_tools,
        count(*) FILTER (WHERE status = 'accepted' AND kind = 'generic') AS n_generic_tools,
        count(*) FILTER (WHERE attempts > 1)                              AS n_repaired_tools
    FROM tool_code_
    GROUP BY env_id
),
rejection_stats AS (                               -- logic: rejections stored for the environment's tools
    SELECT t.env_id, count(*) AS n_rejections
    FROM rejections r
    JOIN (SELECT DISTINCT env_id, tool_id FROM tool_code) t ON r.item_id = t.tool_id
    WHERE r.stage = 'synthesize' AND r.detail LIKE 'env ' || t.env_id || '%'
    GROUP BY t.env_id
)
SELECT
    e.env_id,                                      -- content hash of (tool set, schema, tool sources)
    e.name,                                        -- environment name (= tool set name)
    e.status,                                      -- ready (all tools accepted) | partial | failed
    e.n_tools,                                     -- tools in the tool set
    e.n_tools_accepted,                            -- tools whose code passed every check
    e.n_tools - e.n_tools_accepted AS n_tools_rejected,  -- tools left out of the environment
    CASE WHEN e.n_tools > 0
         THEN round(e.n_tools_accepted::DOUBLE / e.n_tools, 4) END AS acceptance_rate,  -- accepted / tools
    e.backend,                                     -- offline | openai:<model>
    coalesce(json_array_length(json_extract(e.state_schema, '$.collections')), 0) AS n_collections,  -- collections in S
    coalesce(s.n_read_tools, 0) AS n_read_tools,   -- accepted tools that only read state
    coalesce(s.n_write_tools, 0) AS n_write_tools, -- accepted tools that change state
    coalesce(s.n_generic_tools, 0) AS n_generic_tools,  -- accepted tools written by the generic fallback template
    coalesce(s.n_repaired_tools, 0) AS n_repaired_tools,  -- tools that needed an LLM repair round
    coalesce(r.n_rejections, 0) AS n_rejections,   -- failed attempts stored in rejections (with reasons)
    e.reason,                                      -- why the environment is partial or failed
    e.toolset_id,                                  -- the tool set it was synthesized from
    e.run_id                                       -- the run that made it
FROM environments_ e
LEFT JOIN tool_stats s ON s.env_id = e.env_id
LEFT JOIN rejection_stats r ON r.env_id = e.env_id
