"""Parsers of each tool-doc format, and each kind of bad input (file, location, reason)."""

from __future__ import annotations

import json

import pytest
import yaml

from autoforge.errors import ToolDocError
from autoforge.tooldocs import DOC_FORMATS, detect_format, doc_format, parse_document
from autoforge.tooldocs.effects import infer_effect, verb_effect
from autoforge.tooldocs.openapi import derive_name

GET_ORDER = {
    "name": "get_order_details",
    "description": "Get an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
}


def parse(obj, path="doc.json"):
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return parse_document(text, path)


def err(obj, path="doc.json") -> ToolDocError:
    with pytest.raises(ToolDocError) as info:
        parse(obj, path)
    return info.value


# --------------------------------------------------------------------------- OpenAI


@pytest.mark.parametrize(
    "doc",
    [
        GET_ORDER,
        [GET_ORDER],
        {"type": "function", "function": GET_ORDER},
        [{"type": "function", "function": GET_ORDER}],
        {"type": "function", **GET_ORDER},  # Responses-API flat form
        {"tools": [{"type": "function", "function": GET_ORDER}]},
        {"functions": [GET_ORDER]},
    ],
    ids=["single", "list", "wrapper", "wrapper-list", "flat", "tools-container", "functions-container"],
)
def test_openai_shapes(doc):
    parsed = parse(doc)
    assert parsed.format == "openai"
    [tool] = parsed.tools
    assert tool.name == "get_order_details"
    assert tool.parameters["required"] == ["order_id"]
    assert tool.effect == "read"


def test_openai_refs_defs_anyof_nested_arrays_defaults():
    doc = {
        "name": "place_order",
        "description": "Place an order.",
        "parameters": {
            "type": "object",
            "$defs": {
                "Address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                            "required": ["city"]},
                "Item": {"type": "object", "properties": {"product_id": {"type": "string"},
                                                          "quantity": {"type": "integer", "default": 1}}},
            },
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                "address": {"$ref": "#/$defs/Address", "description": "Where to ship."},
                "speed": {"enum": ["standard", "express"], "default": "standard"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                "gift": {"oneOf": [{"$ref": "#/$defs/Address"}, {"type": "boolean"}]},
            },
            "required": ["items"],
        },
        "output_schema": {"$ref": "#/$defs/Order", "$defs": {"Order": {"type": "object",
                                                                       "properties": {"order_id": {"type": "string"}}}}},
    }
    [tool] = parse(doc).tools
    props = tool.parameters["properties"]
    assert props["items"]["items"]["properties"]["quantity"]["default"] == 1
    assert props["address"]["properties"]["city"] == {"type": "string"}
    assert props["address"]["description"] == "Where to ship."  # a sibling of $ref wins
    assert props["gift"]["oneOf"][0]["required"] == ["city"]
    assert props["speed"]["default"] == "standard"
    assert "$defs" not in json.dumps(tool.parameters) and "$ref" not in json.dumps(tool.parameters)
    assert tool.output_schema == {"type": "object", "properties": {"order_id": {"type": "string"}}}
    assert tool.effect == "write"


def test_openai_file_level_definitions_resolve_from_document_root():
    doc = {"definitions": {"Id": {"type": "string", "pattern": "^O\\d{4}$"}},
           "tools": [{"name": "cancel_order", "parameters": {"properties": {"order_id": {"$ref": "#/definitions/Id"}}}}]}
    [tool] = parse(doc).tools
    assert tool.parameters == {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^O\\d{4}$"}},
                               "required": []}


def test_boolean_output_schemas_true_means_none_false_is_refused():
    """A ``$ref`` to a boolean definition resolves to a boolean schema (found by the fuzz test): ``true``
    is no output schema, ``false`` (no output valid) is a ToolDocError naming the pointer, in every format."""
    defs = {"Any": True, "Nothing": False}
    openai = lambda ref: {"definitions": defs, "functions": [{**GET_ORDER, "output_schema": {"$ref": ref}}]}  # noqa: E731
    mcp = lambda ref: {"definitions": defs, "tools": [{**MCP_TOOL, "outputSchema": {"$ref": ref}}]}  # noqa: E731
    for make, pointer in ((openai, "/functions/0/output_schema"), (mcp, "/tools/0/outputSchema")):
        [tool] = parse(make("#/definitions/Any")).tools
        assert tool.output_schema is None
        e = err(make("#/definitions/Nothing"))
        assert e.location == pointer and "boolean schema false" in str(e)
    spec = {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "components": {"schemas": defs},
            "paths": {"/orders/{order_id}": {"get": {"operationId": "get_order", "parameters": [
                {"name": "order_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/REF"}}}}}}}}}
    [tool] = parse(json.dumps(spec).replace("REF", "Any"), "api.json").tools
    assert tool.output_schema is None
    assert "boolean schema false" in str(err(json.dumps(spec).replace("REF", "Nothing"), "api.json"))


def test_property_named_like_a_keyword_is_kept():
    doc = {"name": "set_defs", "parameters": {"properties": {"definitions": {"type": "string"},
                                                             "default": {"type": "integer", "default": {"$ref": "x"}}}}}
    [tool] = parse(doc).tools
    assert set(tool.parameters["properties"]) == {"definitions", "default"}
    assert tool.parameters["properties"]["default"]["default"] == {"$ref": "x"}  # data, not a reference


def test_no_parameters_means_empty_object():
    [tool] = parse({"name": "list_plans", "description": "List plans."}).tools
    assert tool.parameters == {"type": "object", "properties": {}, "required": []}


def test_explicit_effect_overrides_verb():
    [tool] = parse({**GET_ORDER, "x-effect": "write"}).tools
    assert tool.effect == "write"
    e = err({**GET_ORDER, "x-effect": "sometimes"})
    assert e.location == "/x-effect"


# --------------------------------------------------------------------------- MCP


MCP_TOOL = {
    "name": "cancel_appointment",
    "description": "Cancel an appointment.",
    "inputSchema": {"type": "object", "properties": {"appointment_id": {"type": "string"}}, "required": ["appointment_id"]},
    "outputSchema": {"type": "object", "properties": {"status": {"type": "string"}}},
}


def test_mcp_result_and_envelope():
    for doc in ({"tools": [MCP_TOOL]}, {"jsonrpc": "2.0", "id": 1, "result": {"tools": [MCP_TOOL]}}):
        parsed = parse(doc)
        assert parsed.format == "mcp"
        [tool] = parsed.tools
        assert tool.output_schema == MCP_TOOL["outputSchema"]
        assert tool.effect == "write"


@pytest.mark.parametrize(
    "annotations,effect",
    [({"readOnlyHint": True}, "read"), ({"readOnlyHint": False}, "write"), ({"destructiveHint": True}, "write"), ({}, "write")],
)
def test_mcp_annotations_set_effect(annotations, effect):
    tool = {**MCP_TOOL, "name": "lookup_thing" if annotations.get("readOnlyHint") is False else "cancel_thing",
            "annotations": annotations}
    [parsed] = parse({"tools": [tool]}).tools
    # readOnlyHint: false beats the read verb of "lookup"; empty annotations fall back to the verb "cancel"
    assert parsed.effect == effect


def test_mcp_errors():
    e = err({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
    assert "Method not found" in e.reason and e.location == "/error"
    e = err({"tools": [{"name": "x", "inputSchema": {"type": "array"}}]})
    assert e.location == "/tools/0/inputSchema/type"
    e = err({"tools": [{"name": "x", "inputSchema": {}, "annotations": {"readOnlyHint": "yes"}}]})
    assert e.location == "/tools/0/annotations/readOnlyHint"


# --------------------------------------------------------------------------- OpenAPI

OPENAPI_YAML = """
openapi: 3.0.3
info: {title: Shop, version: "1", description: A tiny shop.}
paths:
  /orders/{order_id}:
    parameters:
      - $ref: '#/components/parameters/OrderId'
    get:
      operationId: get_order
      summary: Get an order
      parameters:
        - {name: expand, in: query, schema: {type: boolean}}
        - {name: X-Trace, in: header, schema: {type: string}}
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Order'}
        '404': {description: missing}
    delete:
      summary: Cancel an order
      responses:
        '204': {description: cancelled}
  /orders:
    post:
      operationId: create_order
      requestBody:
        required: true
        content:
          application/json:
            schema:
              allOf:
                - $ref: '#/components/schemas/NewOrder'
                - {type: object, properties: {note: {type: string}}}
      responses:
        '201':
          description: created
          content: {application/json: {schema: {$ref: '#/components/schemas/Order'}}}
  /search:
    post:
      operationId: search_orders
      x-effect: read
      requestBody:
        content: {application/json: {schema: {type: array, items: {type: string}}}}
      responses: {'200': {description: ok}}
components:
  parameters:
    OrderId: {name: order_id, in: path, required: true, schema: {type: string, pattern: '^O\\d{4}$'}}
  schemas:
    NewOrder:
      type: object
      required: [user_id]
      properties: {user_id: {type: string}, items: {type: array, items: {$ref: '#/components/schemas/Item'}}}
    Item: {type: object, properties: {product_id: {type: string}, quantity: {type: integer}}}
    Order: {type: object, properties: {order_id: {type: string}, status: {type: string, enum: [pending, cancelled]}}}
"""


def test_openapi_yaml_operations_become_tools():
    parsed = parse(OPENAPI_YAML, "shop.yaml")
    assert parsed.format == "openapi" and parsed.description == "Shop. A tiny shop"
    tools = {t.name: t for t in parsed.tools}
    assert set(tools) == {"get_order", "delete_orders_by_order_id", "create_order", "search_orders"}
    get = tools["get_order"]
    assert get.parameters["required"] == ["order_id"]
    assert set(get.parameters["properties"]) == {"order_id", "expand"}  # the header parameter is not an argument
    assert get.parameters["properties"]["order_id"]["pattern"] == "^O\\d{4}$"
    assert get.output_schema["properties"]["status"]["enum"] == ["pending", "cancelled"]
    assert get.effect == "read"
    delete = tools["delete_orders_by_order_id"]
    assert delete.effect == "write" and delete.output_schema is None and delete.description == "Cancel an order."
    create = tools["create_order"]
    assert set(create.parameters["properties"]) == {"user_id", "items", "note"}  # body flattened, allOf merged
    assert create.parameters["required"] == ["user_id"]
    assert create.parameters["properties"]["items"]["items"]["properties"]["quantity"] == {"type": "integer"}
    search = tools["search_orders"]
    assert search.effect == "read"  # x-effect beats POST
    assert search.parameters["properties"]["body"]["type"] == "array"


def test_openapi_json_31_and_derived_names():
    doc = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
           "paths": {"/users/{user_id}/orders": {"get": {"parameters": [
               {"name": "user_id", "in": "path", "schema": {"type": ["string", "null"]}}],
               "responses": {"2XX": {"description": "ok", "content": {"application/json": {
                   "schema": {"type": "object", "properties": {"orders": {"type": "array"}}}}}}}}}}}
    [tool] = parse(doc).tools
    assert tool.name == "get_users_by_user_id_orders"
    assert tool.parameters["required"] == ["user_id"]
    assert tool.output_schema["properties"]["orders"] == {"type": "array"}
    assert derive_name("patch", "/a-b/{id}/") == "patch_a_b_by_id"


def test_openapi_errors():
    assert "Swagger 2.0" in err({"swagger": "2.0", "paths": {}}).reason
    assert err({"openapi": "4.0", "paths": {"/a": {}}}).location == "/openapi"
    assert err({"openapi": "3.0.0", "paths": {}}).location == "/paths"
    e = err({"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/Nope"}]}}}})
    assert "unresolvable $ref" in e.reason and e.location == "/paths/~1a/get/parameters/0/$ref"
    e = err({"openapi": "3.0.0", "paths": {"/a": {"get": {"operationId": "x"}, "post": {"operationId": "x"}}}})
    assert "duplicate tool name 'x'" in e.reason and e.location == "/paths/~1a/post"


# --------------------------------------------------------------------------- Markdown


def test_markdown_needs_llm():
    parsed = parse_document("# Tools\n\n## get_order\nGet an order.", "tools.md")
    assert parsed.format == "markdown" and parsed.tools == []
    assert "LLM backend" in DOC_FORMATS["markdown"].needs_llm


# --------------------------------------------------------------------------- the format registry


def test_format_registry_is_what_parse_and_ingest_read():
    assert list(DOC_FORMATS) == ["openapi", "mcp", "openai", "markdown"]  # detection order, then prose
    for fmt in DOC_FORMATS.values():  # structured: recognised and parsed from the value; prose: by suffix, no parser
        assert (fmt.looks_like is None) == (fmt.parse is None) == bool(fmt.suffixes) == bool(fmt.needs_llm), fmt.name
    with pytest.raises(ToolDocError, match="valid formats: openapi, mcp, openai, markdown"):
        doc_format("graphql")
    with pytest.raises(ToolDocError, match="unknown format 'graphql'"):
        parse_document("{}", "x.json", format="graphql")


# --------------------------------------------------------------------------- errors: file, location, reason


def test_invalid_json_names_line_and_column():
    e = err('[\n  {"name": "a",\n   "parameters": {,}}\n]', "bad.json")
    assert e.path == "bad.json" and e.location == "3:19" and "invalid JSON" in e.reason
    assert str(e).startswith("bad.json at 3:19: invalid JSON")


def test_invalid_yaml_names_line_and_column():
    e = err("openapi: 3.0.0\npaths:\n  /a: [unclosed\n", "bad.yaml")
    assert e.path == "bad.yaml" and e.location and e.location.count(":") == 1 and "invalid YAML" in e.reason


def test_yaml_recursive_alias_rejected():
    e = err("a: &x\n  b: *x\n", "loop.yaml")
    assert "recursive" in e.reason


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_file(text):
    assert "empty file" in err(text, "empty.json").reason


def test_schema_that_is_not_a_schema():
    e = err({"name": "f", "parameters": {"type": "object", "properties": {"a": 5}}})
    assert e.location == "/parameters/properties/a" and "JSON Schema" in e.reason
    e = err({"name": "f", "parameters": {"type": "objekt"}})
    assert e.location == "/parameters/type"
    e = err({"name": "f", "parameters": {"type": "string"}})
    assert "type 'object'" in e.reason
    e = err({"name": "f", "parameters": {"properties": {"a": {"type": "string"}}, "required": ["b"]}})
    assert e.location == "/parameters/required" and "'b'" in e.reason
    e = err({"name": "f", "parameters": {"properties": {"a": {"anyOf": []}}}})
    assert e.location == "/parameters/properties/a/anyOf"


def test_unresolvable_and_external_and_cyclic_refs():
    e = err({"name": "f", "parameters": {"properties": {"a": {"$ref": "#/$defs/Missing"}}}})
    assert "unresolvable $ref '#/$defs/Missing'" in e.reason and e.location == "/parameters/properties/a/$ref"
    e = err({"name": "f", "parameters": {"properties": {"a": {"$ref": "other.json#/X"}}}})
    assert "external $ref" in e.reason
    e = err({"name": "f", "parameters": {"$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
                                         "properties": {"root": {"$ref": "#/$defs/Node"}}}})
    assert "cyclic $ref" in e.reason and "#/$defs/Node -> #/$defs/Node" in e.reason


def test_ref_blowup_is_bounded():
    defs = {"L0": {"type": "string"}}
    for i in range(1, 25):
        defs[f"L{i}"] = {"type": "array", "items": {"anyOf": [{"$ref": f"#/$defs/L{i - 1}"}, {"$ref": f"#/$defs/L{i - 1}"}]}}
    e = err({"name": "f", "parameters": {"$defs": defs, "properties": {"a": {"$ref": "#/$defs/L24"}}}})
    assert "expands to more than" in e.reason


def test_duplicate_names_missing_name_and_bad_names():
    e = err([GET_ORDER, GET_ORDER])
    assert "duplicate tool name 'get_order_details'" in e.reason and e.location == "/1"
    e = err([{"description": "no name"}])
    assert "has no 'name'" in e.reason and e.location == "/0"
    e = err({"name": "has space", "parameters": {}})
    assert e.location == "/name"
    e = err({"type": "code_interpreter"})
    assert "only 'function' tools" in e.reason


@pytest.mark.parametrize("doc", [42, "just a string", None, {"foo": 1}, [], [1, 2]])
def test_unrecognised_documents(doc):
    assert isinstance(err(doc), ToolDocError)


def test_detect_format():
    assert detect_format(yaml.safe_load(OPENAPI_YAML), "x") == "openapi"
    assert detect_format({"tools": [MCP_TOOL]}, "x") == "mcp"
    assert detect_format([GET_ORDER], "x") == "openai"


# --------------------------------------------------------------------------- effects


@pytest.mark.parametrize(
    "name,description,effect",
    [
        ("find_user_id_by_email", "", "read"),
        ("getProjectIdByName", "", "read"),
        ("calculate_fare", "", "read"),
        ("check_availability", "", "read"),
        ("check_in_guest", "", "write"),
        ("cancel_pending_order", "", "write"),
        ("assign_user_to_project", "", "write"),
        ("transfer_funds", "", "write"),
        ("book-flight", "", "write"),
        ("order_status", "Returns the status of an order.", "read"),
        ("flight_change", "Changes the flights of a reservation.", "write"),
        ("widget", "A widget.", "unknown"),
    ],
)
def test_verb_effect(name, description, effect):
    assert verb_effect(name, description) == effect


def test_infer_effect_hint_wins():
    assert infer_effect("get_x", hint="write") == "write"
    assert infer_effect("get_x") == "read"
