"""autoforge.patterns: untrusted regular expressions never backtrack without bound and never crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoforge import patterns
from autoforge.patterns import PatternError, PatternTimeout, compile_pattern

CATASTROPHIC = [r"^(a+)+$", r"^(.|.|.)*Z$", r"^(a|aa)+$", r"(x+x+)+y", r"^(\w+\s?)*$"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_classic_redos_patterns_run_on_the_linear_engine(pattern):
    rx = compile_pattern(pattern)
    assert rx.engine == "re2"
    assert rx.search("a" * 200_000 + "!") is None  # would run for ages on a backtracking engine


def test_lookarounds_and_back_references_fall_back_with_a_timeout():
    rx = compile_pattern(r"^(?!x)(a|aa)+$")
    assert rx.engine == "regex"
    assert rx.search("aaaa")
    with pytest.raises(PatternTimeout, match="backtracks"):
        rx.search("a" * 40 + "c", timeout_s=0.05)
    assert compile_pattern(r"(\w+) \1").search("hello hello")


@pytest.mark.parametrize("pattern, reason", [
    ("(", "invalid pattern"),
    ("a" * 3000, "characters long"),
    (r"^TR\d{999999999}$", "positions"),
    (r"((\d{1000}){1000}){1000}", "positions"),
    (r"^\d{1000000000}$", "positions"),  # RE2 reads counts from 10**9 as literal text: never let it
    (r"\d{2147483647}", "positions"),
    (r"^a{99999999999}$", "too large"),
])
def test_unusable_patterns_are_a_pattern_error_with_the_reason(pattern, reason):
    with pytest.raises(PatternError, match=reason):
        compile_pattern(pattern)
    assert not patterns.usable(pattern)


def test_documented_shapes_still_match():
    assert patterns.fullmatch(r"^AC\d{4}$", "AC1234")
    assert not patterns.fullmatch(r"^AC\d{4}$", "AC12345")
    assert patterns.search(r"(?=.*\d).{8,}", "password1")
    assert compile_pattern("a{2000}").fullmatch("a" * 2000)  # over RE2's repeat limit: fallback, bounded size


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab()|*+?{}[]^$.\\d,0123456789=!<", max_size=30), st.text(alphabet="ab1 ", max_size=60))
def test_any_pattern_either_compiles_or_is_a_pattern_error_and_matching_is_bounded(pattern, text):
    try:
        rx = compile_pattern(pattern)
    except PatternError:
        return
    try:
        rx.search(text, timeout_s=0.05)
    except PatternTimeout:
        pass
