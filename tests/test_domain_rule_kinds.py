"""The registry of rule kinds (autoforge.domain.rule_kinds): one list, loud on an unknown name."""

from __future__ import annotations

import pytest

from autoforge.domain.rule_kinds import ENFORCED_KINDS, RULE_KINDS, ParsedRule, rule_kind
from autoforge.errors import ConfigError
from autoforge.types import ToolRule


def test_registry_lists_each_kind_with_how_it_is_enforced():
    assert list(RULE_KINDS) == ["source_status", "result_status", "side_effect", "constraint", "unparsed",
                                "time_window", "cross_record", "quantity_limit", "count_limit", "money",
                                "prohibition", "conversation", "procedure"]
    assert ENFORCED_KINDS == ("source_status", "result_status", "side_effect")
    assert {k.enforced_by for k in RULE_KINDS.values()} == {"template", "argument", "none", "runtime", "judged"}
    assert all(k.description for k in RULE_KINDS.values())


def test_unknown_kind_raises_with_the_valid_names():
    with pytest.raises(ConfigError, match="unknown rule kind 'policy'.*source_status, result_status"):
        rule_kind("policy")
    with pytest.raises(ConfigError, match="valid kinds"):
        ParsedRule("policy", "Only managers may approve")
    assert ParsedRule("unparsed", "Must be nice").kind == "unparsed"


def test_tool_rule_record_accepts_exactly_the_registered_kinds():
    # ToolRule.kind (autoforge/types.py) is checked against the same registry
    row = dict(rule_id="r", env_id="e", tool_id="t", tool="cancel_order", text="Only pending orders")
    for name in RULE_KINDS:
        assert ToolRule(kind=name, **row).kind == name
    with pytest.raises(ValueError, match="unknown rule kind 'policy'"):
        ToolRule(kind="policy", **row)
