-- Stages 3-5: answer tasks (issue 14). A read-only DAG changes nothing; its last read's output
-- answers the user, and the agent's final message must state that answer.
ALTER TABLE tool_sequences ADD COLUMN IF NOT EXISTS goal VARCHAR DEFAULT 'state';  -- state | answer
ALTER TABLE task_dags ADD COLUMN IF NOT EXISTS answer JSON;                         -- AnswerSource: node, path, field
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS kind VARCHAR DEFAULT 'state';            -- state | answer
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS gold_answer JSON;                        -- GoldAnswer: value, kind, tolerance, field
