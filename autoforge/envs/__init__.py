"""Stage 2, environment synthesis and the sandbox: a tool set's docs -> E = (S, F), run safely.

What the docs mean (entities, fields, ids, value domains, prose rules) is read in
:mod:`autoforge.domain`; this package turns that reading into code and runs it. Rooms:

- synthesis: :mod:`~autoforge.envs.synthesis` (one environment, offline or LLM backend),
  :mod:`~autoforge.envs.sample` (the sample state), :mod:`~autoforge.envs.smoke` (smoke calls,
  checks that raise), :mod:`~autoforge.envs.checks` (acceptance checks),
  :mod:`~autoforge.envs.prompts` (the LLM steps);
- code templates: :mod:`autoforge.envs.code` (one module per kind of tool) and
  :mod:`~autoforge.envs.pynames` (Python names of public names);
- the rule engine: :mod:`~autoforge.envs.rule_engine` (checks written into the code, probes);
- the sandbox: :mod:`~autoforge.envs.sandbox` (namespace, helpers) and
  :mod:`~autoforge.envs.static_checks` (the allow-list over source);
- the runtime: :mod:`~autoforge.envs.runtime` (:class:`~autoforge.envs.runtime.Environment`),
  :mod:`~autoforge.envs.validation` (arguments against the JSON Schema) and
  :mod:`~autoforge.envs.interface` (what other stages talk to);
- the worker process: :mod:`~autoforge.envs._worker` (loop, containment; started as
  ``python -m autoforge.envs._worker``), :mod:`~autoforge.envs._worker_client` (the parent side,
  the pool), :mod:`~autoforge.envs.wire` (frames, strict JSON), :mod:`~autoforge.envs.worker_state`
  (the committed state) and :mod:`~autoforge.envs.state_hash`.
"""
