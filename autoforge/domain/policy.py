"""Policy rules: the offline reader of a policy document's rules (in progress: this version reads none).

``read_policy`` and ``prose_policy_rules`` are the entry points synthesis calls
(:mod:`autoforge.envs.policy_guards`); the offline reader fills them in.
"""

from __future__ import annotations

from autoforge.domain.rule_kinds import ParsedRule


def read_policy(text, source, specs, plans, schema) -> list[ParsedRule]:
    """Every rule-like statement of one policy document (none yet)."""
    return []


def prose_policy_rules(spec, plan, schema, specs, plans) -> list[ParsedRule]:
    """The policy forms read from one tool's own prose (none yet)."""
    return []
