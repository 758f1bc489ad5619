"""ERPO training (AutoForge arXiv 2512.22857 §3.4): policy, SFT cold start, ERPO, checkpoints.

    erpo.py        advantages (MEU masking, dynamic sampling, env-level std) and the clipped token loss
    config.py      TrainConfig: every knob with its meaning and source (paper / DAPO / GRPO / ours)
    chat.py        the Hermes/Qwen-style chat format: template, tool-call parsing, assistant spans
    policy.py      tiny offline policy (local BPE + Llama config), load_policy, dialogue encoding
    trajectory.py  Trajectory (the episode engine's output), TrajectoryBuilder, collate, generate_turn
    agent.py       HFAgent (token ids + log-probs), BatchedGenerator, episode_to_trajectory, make_rollout_fn
                   (the trainer's rollout_fn over the shared episode runner), hf_agent_factory (evaluation)
    trainer.py     one readable loop: sample -> score -> advantages -> loss -> step -> log; sft(); train()
    checkpoint.py  save/resume (model dir + optimizer + RNG + step + config)
    agent_card.py  agent.json in each checkpoint: prompt, tools, limits, user, seed, held-out tasks of the run's eval
    curriculum.py  pass rates per task before ERPO, the learnable filter (0 < rate < 1), TaskPassRate rows
    curves.py      learning-curve PNG
    data.py        CuratedData (train / held-out test), gold replays, SFT examples, tokenizer corpus
    run.py         the driver: train_curated(data, config, on_records=...) over records
    synthetic.py   a stand-in rollout_fn (real sampling, rule reward) for tests and controlled ablations

Records in, records out: the warehouse side (reading curated tasks, storing TrainingRun /
TrainingStep / TaskPassRate rows and evaluation episodes) is :mod:`autoforge.pipeline.train`.

Submodules import torch; import them directly (``from autoforge.rl.erpo import compute_advantages``).
"""
