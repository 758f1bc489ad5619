"""What a tool set's docs mean: the one reading of the documentation that later stages share.

Synthesis (:mod:`autoforge.envs`), DAG sampling (:mod:`autoforge.dags`) and task generation
(:mod:`autoforge.tasks`) all need the same understanding of a tool set: which words a name is
made of and what its verb does, which entities and fields the state holds and how their ids
look, which values a field can take, and which rules the prose states. This package is that
understanding, as pure functions over :class:`~autoforge.types.ToolSpec` records. It imports
only :mod:`autoforge.types`, :mod:`autoforge.errors` and :mod:`autoforge.tooldocs` (the parsed
docs, whose read/write tagging, :mod:`autoforge.tooldocs.effects`, happens at ingest); nothing
here imports the stages that read it, the warehouse or the pipeline.

Modules, from the words up:

- :mod:`~autoforge.domain.words`: word rules (snake case, singular/plural, verbs and what they
  do to state, paging/sort/query parameter names);
- :mod:`~autoforge.domain.values`: value domains (a US state, an airport code, a documented
  vocabulary, paired dates in order);
- :mod:`~autoforge.domain.ids`: which entity an id names, documented id shapes, state keys;
- :mod:`~autoforge.domain.keys`: which parameters are identifiers (any spelling), what a tool's
  output holds (dotted leaf paths), the people entities a task's user can be;
- :mod:`~autoforge.domain.tool_kinds`: the registry of tool kinds (what each does to the state,
  whether a task may call it) and the kinds read first: scratchpad, calculator, hand-off;
- :mod:`~autoforge.domain.tools`: the per-tool reading (verb, main entity, kind: lookup, get,
  list, create, update, delete, status, link, unlink, amount, generic);
- :mod:`~autoforge.domain.entities`: role ids that are another entity, the plan of every tool;
- :mod:`~autoforge.domain.fields`: the fields of a record, list filters, the field an amount moves;
- :mod:`~autoforge.domain.outputs`: outputs said in prose ("Returns the order with its items");
- :mod:`~autoforge.domain.statuses`: the status vocabulary;
- :mod:`~autoforge.domain.state`: the offline state structure (:class:`~autoforge.types.StateSchema`);
- :mod:`~autoforge.domain.canonical`: the canonical view (snake_case names, ids as ``<entity>_id``,
  natural keys);
- :mod:`~autoforge.domain.rule_kinds`: the registry of rule kinds and :class:`ParsedRule`;
- :mod:`~autoforge.domain.rules` and :mod:`~autoforge.domain.argument_rules`: the rules read from
  the prose (status rules, timestamps; argument ranges, formats, combinations);
- :mod:`~autoforge.domain.operands`: what a computation tool's parameters mean (operands, units,
  precision).

How the code enforces the rules and probes them is synthesis' part (:mod:`autoforge.envs.rule_engine`).
"""
