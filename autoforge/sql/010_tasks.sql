-- Stages 4-5 (generate, verify): tasks D = (request, S, S*, F) with their difficulty and status.
CREATE TABLE IF NOT EXISTS tasks (
    task_id           VARCHAR PRIMARY KEY,  -- content hash of (env, DAG shape, state change)
    env_id            VARCHAR NOT NULL,     -- the environment whose tools solve it
    dag_id            VARCHAR NOT NULL,     -- the blueprint
    request           VARCHAR NOT NULL,     -- the user's opening message (minimum necessary information)
    user_facts        JSON NOT NULL,        -- hidden facts the simulated user knows and reveals when asked
    initial_state     JSON NOT NULL,        -- S: the task's own initial state (with distractors)
    gold_state        JSON NOT NULL,        -- S*: state after executing the gold DAG
    gold_state_hash   VARCHAR NOT NULL,     -- sha256 of canonical JSON of S*
    gold_calls        JSON NOT NULL,        -- the gold tool calls with concrete arguments, in order
    n_tool_calls      INTEGER NOT NULL,     -- difficulty: tool calls in the gold DAG
    dag_depth         INTEGER NOT NULL,     -- difficulty: longest path in the DAG
    n_reasoning_nodes INTEGER NOT NULL,     -- difficulty: reasoning nodes
    n_requirements    INTEGER NOT NULL,     -- difficulty: merged requirements
    status            VARCHAR NOT NULL CHECK (status IN ('generated', 'verified', 'rejected')),  -- curation state
    split             VARCHAR NOT NULL CHECK (split IN ('train', 'test')),  -- training or held-out evaluation
    batch_id          VARCHAR,              -- the factory batch
    run_id            VARCHAR               -- the run that made it
);
