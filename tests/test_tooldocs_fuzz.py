"""Property test: whatever the input, the parsers either parse or raise ToolDocError, nothing else.

Inputs: arbitrary JSON values (as JSON and as YAML text), arbitrary text, and real documents of
the bundled corpus mutated by dropping keys, swapping a node for an arbitrary value, injecting
``$ref``s (dangling, external, cyclic, pointing anywhere) and duplicating list entries.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoforge.errors import ToolDocError
from autoforge.tooldocs import bundled_corpus_path, parse_document
from autoforge.tooldocs.base import ParsedDocument
from autoforge.tooldocs.source import escape_pointer, load_structured

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
keys = st.sampled_from(["name", "description", "parameters", "type", "properties", "required", "items", "$ref", "$defs",
                        "tools", "inputSchema", "outputSchema", "annotations", "openapi", "paths", "function", "enum",
                        "anyOf", "oneOf", "jsonrpc", "result", "components", "get", "post", "responses"]) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


def check(text: str, path: str) -> None:
    try:
        doc = parse_document(text, path)
    except ToolDocError as exc:
        assert str(exc)  # a message that names the file
        assert exc.path == path
        return
    assert isinstance(doc, ParsedDocument)
    names = [t.name for t in doc.tools]
    assert len(names) == len(set(names))
    for tool in doc.tools:
        assert tool.parameters["type"] == "object" and isinstance(tool.parameters["properties"], dict)
        json.dumps(tool.parameters), json.dumps(tool.output_schema)  # plain JSON


@SETTINGS
@given(json_values)
def test_arbitrary_json_values(value):
    check(json.dumps(value), "fuzz.json")


@SETTINGS
@given(json_values)
def test_arbitrary_values_as_yaml(value):
    check(yaml.safe_dump(value), "fuzz.yaml")


@SETTINGS
@given(st.text(max_size=200), st.sampled_from(["fuzz.json", "fuzz.yaml", "fuzz.md", "fuzz"]))
def test_arbitrary_text(text, path):
    check(text, path)


# --------------------------------------------------------------------------- mutated real documents


@lru_cache(maxsize=None)
def corpus() -> tuple[tuple[str, str], ...]:
    docs = []
    for p in sorted(bundled_corpus_path().rglob("*")):
        if p.suffix in (".json", ".yaml") and p.is_file():
            docs.append((p.name, p.read_text()))
    return tuple(docs)


@lru_cache(maxsize=None)
def parsed_corpus_doc(i: int):
    name, text = corpus()[i]
    return load_structured(text, name)


def pointers(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from pointers(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from pointers(v, prefix + (i,))


def get_parent(doc, path):
    node = doc
    for k in path[:-1]:
        node = node[k]
    return node


@st.composite
def mutated_documents(draw):
    i = draw(st.integers(0, len(corpus()) - 1))
    name = corpus()[i][0]
    doc = copy.deepcopy(parsed_corpus_doc(i))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in pointers(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = get_parent(doc, path), path[-1]
        op = draw(st.sampled_from(["drop", "swap", "ref", "dup", "self_ref"]))
        if op == "drop":
            del parent[key]
        elif op == "swap":
            parent[key] = draw(json_values)
        elif op == "ref":
            target = draw(st.sampled_from(paths))
            ref = "#/" + "/".join(escape_pointer(str(k)) for k in target)
            parent[key] = {"$ref": draw(st.sampled_from([ref, ref + "/nope", "other.json#/x", "#", "#/$defs/Missing"]))}
        elif op == "self_ref":  # a cycle: the node refers to itself or an ancestor
            cut = draw(st.integers(0, len(path) - 1))
            parent[key] = {"$ref": "#/" + "/".join(escape_pointer(str(k)) for k in path[:cut + 1])}
        elif op == "dup" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    as_yaml = name.endswith(".yaml") or draw(st.booleans())
    if as_yaml:
        return yaml.safe_dump(doc, sort_keys=False), name.rsplit(".", 1)[0] + ".yaml"
    return json.dumps(doc), name


@SETTINGS
@given(mutated_documents())
def test_mutated_corpus_documents(case):
    text, path = case
    check(text, path)


def test_unmutated_corpus_documents_parse():
    for name, text in corpus():
        assert parse_document(text, name).tools, name


ADVERSARIAL = [
    ("[" * 20_000 + "]" * 20_000, "deep.json"),  # json.loads hits the recursion limit
    ("a: " + "[" * 5_000, "deep.yaml"),
    ("- " * 3_000 + "x", "deep.yaml"),
    ("x: !!binary aGVsbG8=", "bytes.yaml"),
    ("? [a]\n: b", "key.yaml"),
    ("!!python/object:os.system {}", "unsafe.yaml"),
    ("d: 2024-13-45", "date.yaml"),
    ("a: &x\n  b: *x\n", "loop.yaml"),
    ('{"name": "f", "parameters": {"$ref": "#"}}', "self.json"),
    ('{"openapi": "3.0.0", "paths": {"/a": {"$ref": "#/paths/~1a"}}}', "loop.json"),
]


def test_adversarial_inputs_raise_tooldocerror():
    for text, path in ADVERSARIAL:
        try:
            parse_document(text, path)
        except ToolDocError as exc:
            assert exc.path == path
        else:  # pragma: no cover - every case above is invalid
            raise AssertionError(f"{path} parsed")
