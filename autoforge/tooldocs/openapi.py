"""OpenAPI 3.0 / 3.1 documents (JSON or YAML): each operation becomes a tool.

* name: ``operationId``, else derived from method and path
  (``GET /orders/{order_id}/items`` -> ``get_orders_by_order_id_items``);
* description: ``summary`` and ``description`` joined;
* arguments: path and query parameters (path-level parameters merged, the operation's win),
  plus the JSON request body: an object body's properties are flattened into the argument
  object (its ``required`` kept); a non-object body becomes one argument ``body``. Header and
  cookie parameters are transport details (auth, tracing) and are not tool arguments;
* output schema: the JSON schema of the first 2xx response (200, 201, ..., then ``2XX``);
* effect: ``x-effect`` on the operation if present, else HTTP semantics (GET/HEAD read,
  POST/PUT/PATCH/DELETE write, unless the description says nothing changes: "does not modify
  any data").

Every ``$ref`` into ``components`` is resolved. Swagger 2.0 is rejected (convert it first).
"""

from __future__ import annotations

import re
from typing import Any

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument, ParsedTool, check_name, check_text, check_unique, with_returns
from autoforge.tooldocs.effects import explicit_effect, method_effect
from autoforge.tooldocs.schema import RefResolver, check_schema, lookup_pointer, object_schema, resolved_output
from autoforge.tooldocs.source import pointer_token

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def looks_like_openapi(data: Any) -> bool:
    return isinstance(data, dict) and ("openapi" in data or "swagger" in data)


def parse_openapi(data: Any, path: str) -> ParsedDocument:
    if not isinstance(data, dict):
        raise ToolDocError("an OpenAPI document must be an object", path=path, location="/")
    if "swagger" in data:
        raise ToolDocError(
            "Swagger 2.0 is not supported; convert it to OpenAPI 3 (e.g. with swagger2openapi)",
            path=path, location="/swagger",
        )
    version = data.get("openapi")
    if not isinstance(version, str) or not re.match(r"^3\.[01](\.\d+)?", version):
        raise ToolDocError(f"unsupported OpenAPI version {version!r}; expected 3.0.x or 3.1.x", path=path, location="/openapi")
    paths = data.get("paths")
    if not isinstance(paths, dict) or not paths:
        raise ToolDocError("the document has no 'paths' (no operations to turn into tools)", path=path, location="/paths")

    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    title = check_text(info.get("title"), path, "/info", key="title")
    desc = check_text(info.get("description"), path, "/info")
    description = ". ".join(x.rstrip(".") for x in (title, desc) if x)

    resolver = RefResolver(data, path)
    tools: list[ParsedTool] = []
    for route, item in paths.items():
        item_ptr = f"/paths/{pointer_token(route)}"
        item = _deref(item, data, path, item_ptr)
        if not isinstance(item, dict):
            raise ToolDocError("a path item must be an object", path=path, location=item_ptr)
        shared = item.get("parameters", [])
        for method in METHODS:
            if method not in item:
                continue
            tools.append(_operation(route, method, item[method], shared, f"{item_ptr}/{method}", data, path, resolver))
    if not tools:
        raise ToolDocError("the document defines no operations under 'paths'", path=path, location="/paths")
    check_unique(tools, path)
    return ParsedDocument(format="openapi", tools=tools, description=description, policy=_policy_text(data, desc, path))


def _policy_text(data: dict, info_description: str, path: str) -> dict[str, str]:
    """The document's prose about the whole API: ``info.description`` and each tag's description
    (``tags.<name>.description``), as policy text (autoforge.tooldocs.ingest stores it in policy_docs)."""
    out = {"info.description": info_description} if info_description else {}
    tags = data.get("tags")
    for i, tag in enumerate(tags if isinstance(tags, list) else []):
        if isinstance(tag, dict):
            text = check_text(tag.get("description"), path, f"/tags/{i}")
            if text:
                out[f"tags.{tag.get('name') if isinstance(tag.get('name'), str) else i}.description"] = text
    return out


def derive_name(method: str, route: str) -> str:
    parts = []
    for seg in route.strip("/").split("/"):
        if not seg:
            continue
        m = re.fullmatch(r"\{(.+)\}", seg)
        parts.append(f"by_{m.group(1)}" if m else seg)
    name = "_".join([method.lower()] + parts)
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")[:128]


def _deref(node: Any, doc: Any, path: str, pointer: str) -> Any:
    """Follow a chain of ``$ref`` on a non-schema OpenAPI object (parameter, body, response)."""
    seen: list[str] = []
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise ToolDocError(f"only local $ref are supported, got {ref!r}", path=path, location=f"{pointer}/$ref")
        if ref in seen:
            raise ToolDocError(f"cyclic $ref ({' -> '.join(seen + [ref])})", path=path, location=f"{pointer}/$ref")
        seen.append(ref)
        try:
            node = lookup_pointer(doc, ref)
        except KeyError:
            raise ToolDocError(f"unresolvable $ref {ref!r}", path=path, location=f"{pointer}/$ref") from None
    return node


def _json_schema(content: Any, path: str, pointer: str) -> tuple[Any, str] | None:
    """The schema of the JSON (or form) media type of a ``content`` map, with its pointer."""
    if content is None:
        return None
    if not isinstance(content, dict):
        raise ToolDocError("'content' must map media types to objects", path=path, location=pointer)
    ranked = sorted(
        content,
        key=lambda mt: (0 if mt.split(";")[0].strip() == "application/json" else 1 if "json" in mt
                        else 2 if mt.startswith("application/x-www-form-urlencoded") else 3),
    )
    for mt in ranked:
        if "json" in mt or mt.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            media = content[mt]
            if not isinstance(media, dict):
                raise ToolDocError("a media type object must be an object", path=path, location=f"{pointer}/{pointer_token(mt)}")
            if "schema" in media:
                return media["schema"], f"{pointer}/{pointer_token(mt)}/schema"
    return None


def _operation(route: str, method: str, op: Any, shared: Any, pointer: str, doc: dict, path: str,
               resolver: RefResolver) -> ParsedTool:
    if not isinstance(op, dict):
        raise ToolDocError("an operation must be an object", path=path, location=pointer)
    if "operationId" in op:
        name = check_name(op["operationId"], path, pointer, key="operationId")
    else:
        name = derive_name(method, route)
    if not name:
        raise ToolDocError("cannot derive a tool name; add an operationId", path=path, location=pointer)
    summary = check_text(op.get("summary"), path, pointer, key="summary")
    desc = check_text(op.get("description"), path, pointer)
    description = ". ".join(x.rstrip(".") for x in (summary, desc) if x)
    if description and not description.endswith("."):
        description += "."

    properties: dict[str, Any] = {}
    required: list[str] = []
    params: dict[tuple[str, str], tuple[dict, str]] = {}
    for list_ptr, plist in ((pointer.rsplit("/", 1)[0] + "/parameters", shared), (f"{pointer}/parameters", op.get("parameters", []))):
        if not isinstance(plist, list):
            raise ToolDocError("'parameters' must be a list", path=path, location=list_ptr)
        for i, raw in enumerate(plist):
            p_ptr = f"{list_ptr}/{i}"
            p = _deref(raw, doc, path, p_ptr)
            if not isinstance(p, dict) or not isinstance(p.get("name"), str) or p.get("in") not in (
                "path", "query", "header", "cookie"
            ):
                raise ToolDocError(
                    "a parameter needs a string 'name' and 'in' (path, query, header or cookie)", path=path, location=p_ptr
                )
            params[(p["name"], p["in"])] = (p, p_ptr)
    for (pname, where), (p, p_ptr) in params.items():
        if where in ("header", "cookie"):
            continue
        if "schema" in p:
            raw_schema, s_ptr = p["schema"], f"{p_ptr}/schema"
        else:
            found = _json_schema(p.get("content"), path, f"{p_ptr}/content")
            raw_schema, s_ptr = found if found else ({"type": "string"}, p_ptr)
        schema = resolver.resolve(raw_schema, s_ptr)
        check_schema(schema, path, s_ptr)
        schema = dict(schema) if isinstance(schema, dict) else {}
        pdesc = check_text(p.get("description"), path, p_ptr)
        if pdesc and "description" not in schema:
            schema["description"] = pdesc
        properties[pname] = schema
        if where == "path" or p.get("required") is True:
            required.append(pname)

    if "requestBody" in op:
        body = _deref(op["requestBody"], doc, path, f"{pointer}/requestBody")
        if not isinstance(body, dict):
            raise ToolDocError("'requestBody' must be an object", path=path, location=f"{pointer}/requestBody")
        found = _json_schema(body.get("content"), path, f"{pointer}/requestBody/content")
        if found:
            raw_schema, s_ptr = found
            schema = resolver.resolve(raw_schema, s_ptr)
            check_schema(schema, path, s_ptr)
            schema = _merge_all_of(schema)
            if isinstance(schema, dict) and (schema.get("type") == "object" or "properties" in schema):
                for pname, sub in (schema.get("properties") or {}).items():
                    properties.setdefault(pname, sub)  # a path/query parameter of the same name wins
                required.extend(r for r in schema.get("required", []) if isinstance(r, str))
            else:
                properties["body"] = schema
                if body.get("required") is True:
                    required.append("body")

    parameters = object_schema(
        {"type": "object", "properties": properties, "required": list(dict.fromkeys(required))}, path, pointer
    )

    output_schema = None
    responses = op.get("responses", {})
    if not isinstance(responses, dict):
        raise ToolDocError("'responses' must be an object", path=path, location=f"{pointer}/responses")
    codes = sorted((str(c) for c in responses if re.fullmatch(r"2\d\d", str(c)))) + [
        str(c) for c in responses if str(c).upper() == "2XX"
    ]
    for code in codes:
        r_ptr = f"{pointer}/responses/{code}"
        resp = _deref(responses[code], doc, path, r_ptr)
        if not isinstance(resp, dict):
            raise ToolDocError("a response must be an object", path=path, location=r_ptr)
        found = _json_schema(resp.get("content"), path, f"{r_ptr}/content")
        if found:
            raw_schema, s_ptr = found
            output_schema = resolved_output(resolver.resolve(raw_schema, s_ptr), path, s_ptr, what="schema")
            break
    if output_schema is None and codes:  # the first 2xx response says in words what comes back
        resp = _deref(responses[codes[0]], doc, path, f"{pointer}/responses/{codes[0]}")
        said = resp.get("description") if isinstance(resp, dict) else None
        if isinstance(said, str) and len(said.split()) >= 3:
            description = with_returns(description, said, path, f"{pointer}/responses/{codes[0]}")

    effect = explicit_effect(op, path, pointer) or method_effect(method, description)
    return ParsedTool(
        name=name, description=description, parameters=parameters, output_schema=output_schema,
        effect=effect, location=pointer,
    )


def _merge_all_of(schema: Any) -> Any:
    """``allOf`` of object schemas (a common way to compose request bodies) -> one object schema."""
    if not isinstance(schema, dict) or "allOf" not in schema:
        return schema
    parts = [_merge_all_of(s) for s in schema["allOf"]]
    if not all(isinstance(s, dict) and (s.get("type", "object") == "object") for s in parts):
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    merged["type"] = "object"
    props: dict[str, Any] = dict(merged.get("properties", {}))
    req: list[str] = list(merged.get("required", []))
    for s in parts:
        props.update(s.get("properties", {}))
        req.extend(s.get("required", []))
    merged["properties"] = props
    merged["required"] = list(dict.fromkeys(req))
    return merged
