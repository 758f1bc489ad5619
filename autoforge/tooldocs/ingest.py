"""Ingest files and folders of tool documentation into ``ToolDoc``/``ToolSpec``/``ToolSet`` records.

docs/design.md#stage-1-ingest. Grouping (one tool set = one candidate environment, as in the paper's
"each document set becomes an environment"):

* a file given on its own is its own tool set, named by its stem;
* a folder is one tool set named after the folder, made of the documents directly in it;
  each subfolder is treated the same way (a folder of folders gives one tool set per
  subfolder). A ``README.md`` in a folder describes that tool set (its first paragraph
  becomes ``ToolSet.description``); it is not parsed as a tool document. Hidden files are
  skipped.

Policy documents (issue 33): a file of a folder whose stem is ``policy`` (any case; ``.md``,
``.markdown`` or ``.txt``), and any file given in ``policies`` (``--policy FILE``), is the tool set's
policy, not a tool document: it becomes a :class:`~autoforge.types.PolicyDoc`, and its content hash is
part of the tool set's id, so a changed policy is a changed tool set (its environment is synthesized
anew). A ``policies`` file inside a folder being ingested belongs to that folder's tool set; one
outside every folder governs every tool set of the other paths (never the bundled corpus). Policy text
inside a tool doc (OpenAPI ``info.description`` and tag descriptions, an MCP result's
``instructions``) is stored as a policy document too, with source ``<file>#<location>``; being part
of its tool doc, it leaves the tool set id as it was.

A rejected document is recorded (status ``rejected`` with the file, location and reason)
and the rest of the batch goes on. So is a path that gives no document: a missing path, an
empty or unreadable folder, a symlink loop, a link out of the folder, a pipe or device (a
rejected entry with no content; :func:`plan_groups` says which links are followed). Every
document is read under the bounds of :mod:`autoforge.tooldocs.source` (size, nesting, YAML
aliases, integer digits ...), so no single document can stop the batch or exhaust memory. Tool names must be unique within a tool set: a later
document that redefines a name is rejected. Ids are content hashes, so ingesting the same
input twice gives identical records. Pure: nothing is written anywhere; the caller persists
``IngestResult.records()`` (:mod:`autoforge.pipeline.ingest` writes them in one transaction).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ToolDocError
from autoforge.tooldocs.effects import classify_toolset
from autoforge.tooldocs.formats import DOC_FORMATS
from autoforge.tooldocs.parse import parse_document
from autoforge.tooldocs.source import SUPPORTED_SUFFIXES, read_bytes, read_text
from autoforge.types import PolicyDoc, Record, Rejection, ToolDoc, ToolSet, ToolSpec, content_id

BUNDLED_LABEL = "autoforge/data/tooldocs"


class IngestResult(BaseModel):
    """Everything one ingest produced. ``errors`` holds one message per rejected document or path."""

    model_config = ConfigDict(extra="forbid")

    docs: list[ToolDoc] = Field(default_factory=list)
    specs: list[ToolSpec] = Field(default_factory=list)
    toolsets: list[ToolSet] = Field(default_factory=list)
    policies: list[PolicyDoc] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    needs_llm: list[str] = Field(default_factory=list)  # paths of prose documents waiting for an LLM backend

    @property
    def rejected(self) -> list[ToolDoc]:
        return [d for d in self.docs if d.status == "rejected"]

    @property
    def ok(self) -> bool:
        """True when nothing was rejected (the CLI's exit code)."""
        return not self.errors

    def records(self) -> list[Record]:
        """All records in write order: docs, specs, tool sets, then policy documents."""
        return [*self.docs, *self.specs, *self.toolsets, *self.policies]

    def policy_counts(self) -> dict[str, int]:
        """Policy documents read per tool set name."""
        return dict(Counter(p.toolset for p in self.policies))

    def rejections(self, run_id: str | None = None) -> list[Rejection]:
        """One ``Rejection`` row per rejected document (feeds the stage funnel), reason = a short category."""
        return [
            Rejection(
                rejection_id=content_id("rej", "ingest", d.doc_id, d.error),
                stage="ingest",
                item_id=d.doc_id,
                reason=error_category(d.error or ""),
                detail=d.error,
                run_id=run_id if run_id is not None else d.run_id,
            )
            for d in self.rejected
        ]

    def counts(self) -> dict[str, int]:
        status = Counter(d.status for d in self.docs)
        return {
            "docs": len(self.docs),
            "accepted": status["accepted"],
            "rejected": status["rejected"],
            "needs_llm": status["needs_llm"],
            "tools": len(self.specs),
            "toolsets": len(self.toolsets),
            "policies": len(self.policies),
        }


class _Group(BaseModel):
    name: str
    files: list[Path]
    readme: Path | None = None
    policies: list[Path] = Field(default_factory=list)
    top: Path | None = None  # the path given that this group was found under


def bundled_corpus_path() -> Path:
    """The folder of tool documentation shipped with the package (one subfolder per domain)."""
    return Path(__file__).resolve().parent.parent / "data" / "tooldocs"


def ingest_bundled(*, run_id: str | None = None) -> IngestResult:
    """Ingest the bundled corpus (``bundled_corpus_path()``)."""
    return ingest_paths([bundled_corpus_path()], run_id=run_id)


def ingest_paths(paths: Iterable[str | Path], *, run_id: str | None = None,
                 policies: Iterable[str | Path] = ()) -> IngestResult:
    """Ingest files and folders (see the module docstring for how they group into tool sets, and
    where the ``policies`` files go).

    Documents of the bundled corpus are recorded as ``autoforge/data/tooldocs/<domain>/<file>``
    wherever the package is installed, so their ids are the same on every machine.
    """
    return _ingest(plan_groups(list(paths), list(policies)), run_id=run_id,
                   label=(bundled_corpus_path(), BUNDLED_LABEL))


POLICY_SUFFIXES = frozenset({".md", ".markdown", ".txt"})


def is_policy_file(p: Path) -> bool:
    """A file a folder holds as its tool set's policy: stem ``policy`` (any case), Markdown or text."""
    return p.stem.lower() == "policy" and p.suffix.lower() in POLICY_SUFFIXES


_CATEGORIES = (
    ("empty file", "empty_file"),
    ("invalid JSON", "invalid_json"),
    ("invalid YAML", "invalid_yaml"),
    ("not UTF-8", "not_utf8"),
    ("cyclic $ref", "cyclic_ref"),
    ("unresolvable $ref", "unresolvable_ref"),
    ("external $ref", "external_ref"),
    ("duplicate tool name", "duplicate_tool_name"),
    ("unsupported file type", "unsupported_file_type"),
    ("unrecognised tool document", "unrecognised_format"),
    ("has no 'name'", "missing_name"),
    ("invalid tool name", "invalid_name"),
    ("no tools", "no_tools"),
    ("no operations", "no_tools"),
    ("OpenAPI version", "unsupported_version"),
    ("Swagger", "unsupported_version"),
    ("cannot read file", "unreadable"),
    ("cannot list folder", "unreadable"),
    ("no such file or folder", "missing_path"),
    ("no tool documents in this folder", "empty_folder"),
    ("symlink loop", "symlink_loop"),
    ("broken symlink", "broken_symlink"),
    ("points outside the folder", "symlink_outside"),
    ("ingested already by another path", "duplicate_path"),
    ("not a regular file", "not_regular_file"),
    ("file too large", "too_large"),
    ("document too large", "too_large"),
    ("nested too deeply", "too_deep"),
    ("levels of objects/arrays", "too_deep"),
    ("folders nested more than", "too_deep"),
    ("YAML aliases", "alias_bomb"),
    ("document expands to more than", "alias_bomb"),
    ("expands to more than", "ref_blowup"),
    ("integer literal of", "integer_too_long"),
    ("NaN, Infinity", "not_finite"),
    ("duplicate key", "duplicate_key"),
    ("lone surrogate", "not_unicode"),
)


def error_category(message: str) -> str:
    """A short, stable category for a rejection message (for ``v_stage_funnel``), default ``invalid_schema``."""
    for needle, category in _CATEGORIES:
        if needle in message:
            return category
    return "invalid_schema"


class _PathProblem(BaseModel):
    """A path that yields no document: missing, unreadable, an empty folder, a symlink loop ...
    Recorded as a rejected entry of tool set ``toolset`` (so it counts, and the CLI exits non-zero)."""

    toolset: str
    path: Path
    reason: str


MAX_FOLDER_DEPTH = 32  # folders below the one given; deeper trees are rejected folder by folder


def plan_groups(paths: list[str | Path], policies: list[str | Path] = ()) -> list[_Group | _PathProblem]:
    """Tool-set groups in input order, and the paths that give no document (missing, empty ...).
    ``policies``: files that are policy documents wherever they are (module docstring).

    Symbolic links: a path given explicitly is followed wherever it points. Inside a folder, a link
    is followed only to a file or folder inside the same given folder (by real path) that is not
    walked already: a link out of the folder, a link loop (``a -> b -> a``, ``loop -> .``), a broken
    link and a second route to a folder already walked are each rejected with the reason, so a
    folder walk always ends and never reads files it was not given. Pipes, sockets and devices are
    rejected without being opened.
    """
    out: list[_Group | _PathProblem] = []
    seen_files: set[Path] = set()
    names: Counter[str] = Counter()
    named = {Path(p).resolve(): Path(p) for p in policies}  # real path -> as given
    top_given: list[Path] = [Path(".")]

    def add(name: str, files: list[tuple[Path, Path]], readme: Path | None, qualified: str) -> None:
        fresh, policy = [], []
        for f, real in files:  # (path, real path): a file reached twice (a link to it, given twice) is read once
            if real not in seen_files:
                seen_files.add(real)
                (policy if real in named or is_policy_file(f) else fresh).append(f)
        fresh.sort()
        policy.sort()
        if not fresh and not policy:
            return
        if names[name]:
            name = qualified
        names[name] += 1
        out.append(_Group(name=name, files=fresh, readme=readme, policies=policy, top=top_given[0]))

    def problem(toolset: str, path: Path, reason: str) -> None:
        out.append(_PathProblem(toolset=toolset or "toolset", path=path, reason=reason))

    def classify(p: Path, top_real: Path, walked: set[Path]) -> tuple[str, Path] | str:
        """("file" | "dir" | "other", real path) of a folder entry, or why it is not followed."""
        link = p.is_symlink()
        try:
            if link:
                try:
                    real = p.resolve(strict=True)
                except RuntimeError:  # Python < 3.13 reports a loop this way, later ones as ELOOP
                    return f"symlink loop: {p.name} -> {os.readlink(p)} leads back to itself; remove the link"
                except FileNotFoundError:
                    return f"broken symlink: {p.name} -> {os.readlink(p)} points to nothing; remove or fix the link"
                if real != top_real and top_real not in real.parents:
                    return (f"symlink {p.name} points outside the folder being ingested (to {real}); links are only "
                            "followed inside it: copy the documents in, or ingest that path itself")
            else:
                real = p.resolve()
            mode = real.stat().st_mode
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"symlink loop: {p.name} leads back to itself; remove the link"
            return f"cannot read {p.name} ({exc.strerror or exc}); check the path and permissions"
        if stat.S_ISDIR(mode):
            if real in chain:
                return (f"symlink loop: {p.name} leads back to folder {real}, which contains it; remove the link")
            if link and real in walked:
                return (f"symlink {p.name} leads to folder {real}, which is ingested already by another path; "
                        "remove the link")
            return "dir", real
        return ("file" if stat.S_ISREG(mode) else "other"), real

    chain: set[Path] = set()  # real paths of the folders being walked (the current one and its parents)

    def walk(folder: Path, top: Path, top_real: Path, walked: set[Path], depth: int) -> None:
        real_folder = folder.resolve()
        walked.add(real_folder)
        chain.add(real_folder)
        toolset = folder.name or "toolset"
        try:
            if depth > MAX_FOLDER_DEPTH:
                problem(toolset, folder, f"folders nested more than {MAX_FOLDER_DEPTH} levels below {top}; "
                                         "ingest the deeper folders on their own")
                return
            try:
                entries = sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "__pycache__")
            except OSError as exc:
                problem(toolset, folder, f"cannot list folder ({exc.strerror or exc}); check the path and permissions")
                return
            files: list[tuple[Path, Path]] = []
            readme: Path | None = None
            subdirs: list[Path] = []
            rejected = False
            # links after plain entries: a folder reached both directly and by a link is walked directly
            for p in sorted(entries, key=lambda e: e.is_symlink()):
                kind = classify(p, top_real, walked)
                if isinstance(kind, str) or kind[0] == "other":
                    rejected = True
                    problem(toolset, p, kind if isinstance(kind, str) else
                            "not a regular file (a pipe, socket or device); remove it from the folder")
                elif kind[0] == "dir":
                    subdirs.append(p)
                    walked.add(kind[1])
                elif _is_readme(p):
                    readme = readme or p
                else:
                    files.append((p, kind[1]))
            subdirs.sort()
            if files:
                rel = folder.relative_to(top.parent) if folder != top else Path(folder.name)
                add(toolset, files, readme, ".".join(rel.parts))
            elif not subdirs and not rejected:
                problem(toolset, folder, "no tool documents in this folder (expected .json, .yaml, .yml or .md files)")
            for sub in subdirs:
                walk(sub, top, top_real, walked, depth + 1)
        finally:
            chain.discard(real_folder)

    for raw in paths:
        p = Path(raw)
        top_given[0] = p
        try:
            is_dir, is_file, exists = p.is_dir(), p.is_file(), p.exists()
        except OSError as exc:
            problem(p.stem, p, f"cannot read ({exc.strerror or exc}); check the path and permissions")
            continue
        if is_dir:
            try:
                top_real = p.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                problem(p.name, p, f"cannot resolve folder ({exc}); check the path")
                continue
            walk(p, p, top_real, set(), 0)
        elif is_file:
            add(p.stem, [(p, p.resolve())], None, ".".join(p.with_suffix("").parts[-2:]))
        elif exists:
            problem(p.stem, p, "not a regular file or folder (a pipe, socket or device); give files or folders of "
                               "tool documentation")
        elif p.is_symlink():
            problem(p.stem, p, "broken symlink or symlink loop: it points to nothing readable; fix the link")
        else:
            problem(p.stem, p, "no such file or folder; check the path (it is read on the machine running the ingest)")
    outside = [named[r] for r in named if r not in seen_files]  # --policy files in no folder given: every set's
    if outside:
        bundled = bundled_corpus_path()
        for g in out:
            if isinstance(g, _Group) and g.top is not None and g.top.resolve() != bundled:
                g.policies = [*g.policies, *outside]
    return out


def _is_readme(p: Path) -> bool:
    return p.stem.lower() == "readme"


def _readme_description(path: Path) -> str:
    try:
        text = read_text(path)
    except ToolDocError:
        return ""
    for para in text.split("\n\n"):
        para = para.strip()
        if para and not para.startswith("#"):
            return " ".join(line.strip() for line in para.splitlines())
    return ""


def _ingest(groups: list[_Group | _PathProblem], *, run_id: str | None, label: tuple[Path, str] | None = None) -> IngestResult:
    result = IngestResult()

    def shown(p: Path) -> str:
        if label is not None:
            try:
                return f"{label[1]}/{p.resolve().relative_to(label[0]).as_posix()}"
            except (ValueError, OSError, RuntimeError):  # outside the bundled corpus, or a link loop
                pass
        return str(p)

    for group in groups:
        if isinstance(group, _PathProblem):
            path = shown(group.path)
            error = str(ToolDocError(group.reason, path=path))
            result.errors.append(error)
            result.docs.append(_doc(group.toolset, path, None, "", "rejected", error, 0, run_id))
            continue
        _ingest_group(group, run_id, shown, result)
    return result


def _ingest_group(group: _Group, run_id: str | None, shown, result: IngestResult) -> None:
    names: dict[str, str] = {}  # tool name -> document that defined it
    doc_ids: list[str] = []
    tool_ids: list[str] = []
    descriptions: list[str] = []
    if group.readme is not None:
        descriptions.append(_readme_description(group.readme))
    file_policies: list[PolicyDoc] = []  # policy files: part of the tool set id
    inline_policies: list[PolicyDoc] = []  # policy text inside the tool docs
    for file in group.policies:
        path = shown(file)
        try:
            file_policies.append(_policy(group.name, path, read_text(file), run_id))
        except ToolDocError as exc:
            error = _clip(str(exc))
            result.errors.append(error)
            result.docs.append(_doc(group.name, path, None, _raw_text(file), "rejected", error, 0, run_id))

    for file in group.files:
        path = shown(file)
        content = ""
        try:
            content = read_text(file)
            if file.suffix.lower() not in SUPPORTED_SUFFIXES:
                raise ToolDocError(
                    f"unsupported file type {file.suffix or '(none)'!r}; expected one of {sorted(SUPPORTED_SUFFIXES)}",
                    path=path,
                )
            parsed = parse_document(content, path)
            for tool in parsed.tools:
                if tool.name in names:
                    raise ToolDocError(
                        f"duplicate tool name {tool.name!r}: already defined by {names[tool.name]} in tool set "
                        f"{group.name!r}; tool names must be unique in a tool set",
                        path=path, location=tool.location or "/",
                    )
        except ToolDocError as exc:
            if not content:
                content = _raw_text(file)
            error = _clip(str(exc))
            result.errors.append(error)
            result.docs.append(_doc(group.name, path, None, content, "rejected", error, 0, run_id))
            continue

        needs_llm = DOC_FORMATS[parsed.format].needs_llm
        if needs_llm:  # prose: no offline parser
            doc = _doc(group.name, path, parsed.format, content, "needs_llm", f"{path}: {needs_llm}", 0, run_id)
            result.docs.append(doc)
            result.needs_llm.append(path)
            continue
        doc = _doc(group.name, path, parsed.format, content, "accepted", None, len(parsed.tools), run_id)
        result.docs.append(doc)
        doc_ids.append(doc.doc_id)
        if parsed.description:
            descriptions.append(parsed.description)
        inline_policies.extend(_policy(group.name, f"{path}#{where}", text, run_id) for where, text in parsed.policy.items())
        for tool in parsed.tools:
            names[tool.name] = path
            spec = ToolSpec(
                tool_id=content_id("tool", group.name, tool.name, tool.parameters, tool.output_schema),
                toolset=group.name,
                name=tool.name,
                description=tool.description,
                parameters=tool.parameters,
                output_schema=tool.output_schema,
                effect=tool.effect,
                doc_id=doc.doc_id,
                run_id=run_id,
            )
            result.specs.append(spec)
            tool_ids.append(spec.tool_id)

    # Effects judged over the whole tool set (a set of pure functions reads); only "unknown" ever changes.
    first = len(result.specs) - len(tool_ids)
    effects, kind = classify_toolset(result.specs[first:])
    for i in range(first, len(result.specs)):
        spec = result.specs[i]
        if effects.get(spec.name, spec.effect) != spec.effect:
            result.specs[i] = spec.model_copy(update={"effect": effects[spec.name]})

    policy_ids = sorted(p.policy_id for p in file_policies)
    toolset_id = (content_id("toolset", group.name, sorted(tool_ids), policy_ids) if policy_ids
                  else content_id("toolset", group.name, sorted(tool_ids)))  # no policy file: the id it always had
    if tool_ids:
        result.toolsets.append(
            ToolSet(
                toolset_id=toolset_id,
                name=group.name,
                description=next((d for d in descriptions if d), ""),
                doc_ids=doc_ids,
                tool_ids=tool_ids,
                n_tools=len(tool_ids),
                kind=kind,
                run_id=run_id,
            )
        )
    governed = toolset_id if tool_ids else None
    result.policies.extend(p.model_copy(update={"toolset_id": governed}) for p in [*file_policies, *inline_policies])


MAX_ERROR_CHARS = 2_000  # a message quoting a huge value from the document is cut short


def _clip(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 40] + f" ... ({len(message):,} characters)"


def _raw_text(file: Path) -> str:
    """A rejected file's text for inspection (invalid UTF-8 replaced); "" when it cannot or should not be read
    (too large, not a regular file)."""
    try:
        return read_bytes(file).decode("utf-8", errors="replace")
    except ToolDocError:
        return ""


def _policy(toolset: str, source: str, text: str, run_id: str | None) -> PolicyDoc:
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PolicyDoc(policy_id=content_id("policy", toolset, source, sha), toolset=toolset, source=source, sha256=sha,
                     text=text, n_chars=len(text), run_id=run_id)


def _doc(toolset: str, path: str, fmt, content: str, status: str, error: str | None, n_tools: int,
         run_id: str | None) -> ToolDoc:
    return ToolDoc(
        doc_id=content_id("doc", toolset, path, content),
        toolset=toolset,
        path=path,
        format=fmt,
        content=content,
        status=status,
        error=error,
        n_tools=n_tools,
        run_id=run_id,
    )
