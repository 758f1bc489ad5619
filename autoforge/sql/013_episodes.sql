-- Stage 6 (rollouts): full episode transcripts with reward, termination and user-error labels.
CREATE TABLE IF NOT EXISTS episodes (
    episode_id       VARCHAR PRIMARY KEY,  -- hash of (task, agent, user, trial, eval/run)
    task_id          VARCHAR NOT NULL,     -- the task played
    env_id           VARCHAR NOT NULL,     -- its environment
    agent            VARCHAR NOT NULL,     -- agent name (oracle, random, hf:<dir>, openai:<model>)
    user_sim         VARCHAR NOT NULL,     -- simulated user name and error-injection settings
    trial            INTEGER NOT NULL,     -- trial index for pass^k
    messages         JSON NOT NULL,        -- the transcript: user/assistant/tool messages and tool calls
    reward           DOUBLE,               -- 1 if final state == S*, 0 otherwise, NULL if it could not be scored
    reward_info      JSON NOT NULL,        -- reward components: state match, differing collections
    final_state_hash VARCHAR,              -- hash of the final state
    termination      VARCHAR NOT NULL,     -- user_stop | max_turns | max_tokens | env_error | agent_error ...
    n_turns          INTEGER NOT NULL,     -- agent turns taken
    user_error       BOOLEAN,              -- ground truth: an error was injected into the user
    user_error_kind  VARCHAR,              -- wrong_fact | withheld_fact | premature_stop
    judge_flag       BOOLEAN,              -- user-error judge verdict (ERPO masks flagged rollouts)
    eval_id          VARCHAR,              -- the evaluation it belongs to
    run_id           VARCHAR               -- the run that made it
);
