"""What a tool set's docs mean: the one reading of the documentation that later stages share.

Synthesis (:mod:`autoforge.envs`), DAG sampling (:mod:`autoforge.dags`) and task generation
(:mod:`autoforge.tasks`) all need the same understanding of a tool set: which words a name is
made of and what its verb does, which entities and fields the state holds and how their ids
look, which values a field can take, and which rules the prose states. This package is that
understanding, as pure functions over :class:`~autoforge.types.ToolSpec` records; it imports
only :mod:`autoforge.types`, :mod:`autoforge.patterns` and :mod:`autoforge.tooldocs` (the
parsed docs), and nothing from the stages that read it.

Modules:

- :mod:`~autoforge.domain.words`: word rules (snake case, singular/plural, verbs and what they
  do, paging/sort/query parameter names).
"""
