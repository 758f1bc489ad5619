"""When a tool set yields no task, the factory says what to change in the doc, naming the tool and
the field (autoforge/pipeline/advice.py), not only the internal drop reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoforge.cli import main
from autoforge.pipeline import EMPTY_EXIT_CODE, environment_yield
from autoforge.pipeline.advice import ADVICE, Docs, Drop, doc_advice
from autoforge.types import ToolSpec

BOOKSHOP = Path(__file__).parent / "fixtures" / "user_docs" / "bookshop"
EMPTY_AT_GENERATE = {"n_verified": 0, "n_tools_accepted": 3, "n_edges": 4, "n_sequences": 4, "n_dags": 5,
                     "n_generated": 0, "kind": "stateful"}


def spec(name: str, params: dict, output: dict | None = None, effect: str = "read") -> ToolSpec:
    return ToolSpec(tool_id=f"tool_{name}", toolset="t", name=name, parameters={"type": "object", "properties": params},
                    output_schema=output, effect=effect, doc_id="doc")


def plain_bookshop(output: dict | None = None) -> Docs:
    """The fixture's three tools (as ToolSpecs), ``output`` as search_books' output schema."""
    tools = json.loads((BOOKSHOP / "tools.json").read_text())
    specs = [spec(t["function"]["name"], t["function"]["parameters"]["properties"],
                  output if t["function"]["name"] == "search_books" else None,
                  "write" if t["function"]["name"] == "place_order" else "read") for t in tools]
    return Docs({s.name: s for s in specs})


def test_a_plain_bookshop_that_yields_nothing_is_told_what_to_change(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    rc = main(["factory", "--no-prefect", "--warehouse", wh, "--tasks-per-env", "10", str(BOOKSHOP)])
    err = capsys.readouterr().err
    (row,) = environment_yield(wh, ["bookshop"])
    if rc == 0:  # the docs are read well enough to yield tasks: then there is nothing to advise
        assert row["n_verified"] and row["advice"] == []
        return
    assert rc == EMPTY_EXIT_CODE and row["advice"], row
    assert "what to change in the doc:" in err
    assert any("`search_books`" in a for a in row["advice"]), row["advice"]  # the tool, by its name in the doc
    for text in row["advice"]:
        assert text in err
        assert "unresolvable_list" not in text and "ambiguous_reasoning" not in text  # the user's terms


def test_a_list_without_fields_names_the_tool_the_list_and_an_output_schema():
    drop = Drop("sample", "unresolvable_list", 4, "search_books.books has no field to choose an item by")
    (text,) = doc_advice({**EMPTY_AT_GENERATE, "n_dags": 0}, [drop], plain_bookshop())
    assert text.startswith("`search_books` returns a list (`books`) but names no field to choose an item by")
    assert '"book_id"' in text and "output_schema" in text


def test_a_search_that_finds_nothing_names_the_parameter_and_the_fields_to_match():
    output = {"type": "object", "properties": {"books": {"type": "array", "items": {"type": "object", "properties": {
        "book_id": {"type": "string"}, "title": {"type": "string"}, "author": {"type": "string"}}}}}}
    drop = Drop("generate", "ambiguous_reasoning", 28, "argmax: no items to choose from (at argmax over search_books)")
    (text,) = doc_advice(EMPTY_AT_GENERATE, [drop], plain_bookshop(output))
    assert "`search_books` found nothing" in text and "`query` matches no field" in text
    assert "`title` or `author` instead of `query`" in text


def test_the_stage_that_came_up_empty_is_the_one_advised_on():
    late = Drop("generate", "gold_call_error", 9, "place_order({'quantity': -1}) failed: quantity must be positive "
                                                    "(at place_order)")
    early = Drop("sample", "unresolvable_list", 1, "search_books.books has no field to choose an item by")
    (text,) = doc_advice(EMPTY_AT_GENERATE, [early, late], plain_bookshop())
    assert text.startswith("`place_order` refused arguments its docs allow (quantity must be positive)")
    assert doc_advice({**EMPTY_AT_GENERATE, "n_verified": 3}, [late], plain_bookshop()) == []  # it yields: no advice
    assert doc_advice(EMPTY_AT_GENERATE, [Drop("generate", "some_new_reason", 5, "x")], plain_bookshop()) == []


def test_a_graph_without_edges_names_an_id_and_who_should_return_it():
    row = {**EMPTY_AT_GENERATE, "n_edges": 0, "n_sequences": 0, "n_dags": 0}
    (text,) = doc_advice(row, [], plain_bookshop())
    assert "`get_book` takes `book_id`" in text and "`search_books`" in text


def test_every_advised_reason_is_one_a_stage_raises():
    import re

    src = "".join(p.read_text() for d in ("dags", "tasks") for p in (Path(__file__).parents[1] / "autoforge" / d).glob("*.py"))
    raised = set(re.findall(r"(?:DagError|DagExecutionError)\(\"(\w+)\"", src))
    assert set(ADVICE) <= raised, set(ADVICE) - raised


@pytest.mark.parametrize("drops, starts", [
    ([Drop("generate", "no_candidate", 3, "no record to take book_id from (at get_book)"),
      Drop("generate", "ambiguous_lookup", 2, "no book has a unique title (at search_books)")],
     ["`get_book` needs `book_id`, but no record holds one", "`search_books` finds a book by title, which no book has alone"]),
    ([Drop("generate", "unobservable_write", 60, "write place_order (call 1) changes nothing (at place_order)"),
      Drop("generate", "no_state_change", 3, "the gold run leaves the state as it was")],
     ["`place_order` changes nothing a read of the tool set shows", "the writes (`place_order`) left the state as it was"]),
], ids=["missing record, lookup not unique", "writes that change nothing visible"])
def test_each_drop_is_advised_on_by_the_tool_and_parameter_it_names(drops, starts):
    texts = doc_advice(EMPTY_AT_GENERATE, drops, plain_bookshop())
    assert len(texts) == len(starts) and all(t.startswith(s) for t, s in zip(texts, starts)), texts
