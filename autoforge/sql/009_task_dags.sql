-- Stage 3 (sample): task blueprints: tool + reasoning nodes and the edges between them.
CREATE TABLE IF NOT EXISTS task_dags (
    dag_id         VARCHAR PRIMARY KEY,  -- content hash of (env, nodes)
    env_id         VARCHAR NOT NULL,     -- the environment
    seq_id         VARCHAR,              -- the tool sequence it was built from
    nodes          JSON NOT NULL,        -- [{node_id, kind, tool|op, params, args, requirement}]
    edges          JSON NOT NULL,        -- [[parent, child]]: parent's output feeds child's input
    n_requirements INTEGER NOT NULL,     -- requirements merged into it
    run_id         VARCHAR               -- the run that made it
);
