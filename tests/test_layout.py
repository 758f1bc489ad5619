"""The package's layout rules, checked from the code itself (imports inside functions count):

- stage packages take and return records: none of them imports the warehouse or the pipeline;
- only ``autoforge/pipeline`` and ``autoforge/warehouse`` import the warehouse (the CLI, the
  integrations, the flows and the benchmarks read and write it through the pipeline);
- no two subpackages import each other, directly or through a chain;
- nothing in the package or the flows points at a file outside the repository;
- every ``autoforge COMMAND`` a message or docstring suggests is a real command.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "autoforge"
STAGE_PACKAGES = ("tooldocs", "domain", "envs", "dags", "tasks", "rollout", "rl")


def _modules(path: Path):
    for f in sorted(path.rglob("*.py")):
        yield f, ast.parse(f.read_text(), filename=str(f))


def _imported(f: Path, tree: ast.AST) -> list[tuple[str, int]]:
    """Every module ``f`` imports (absolute names), anywhere in the file."""
    me = list(f.relative_to(ROOT).with_suffix("").parts)  # autoforge/cli/sql.py -> autoforge.cli.sql
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out += [(a.name, n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = me[:len(me) - n.level] if f.name != "__init__.py" else me[:len(me) - n.level + 1]
                mod = ".".join(base + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            out.append((mod, n.lineno))
            out += [(f"{mod}.{a.name}", n.lineno) for a in n.names]  # `from autoforge import warehouse`
    return out


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "autoforge" and (PKG / parts[1]).is_dir():
        return parts[1]
    return None


def subpackage_graph() -> tuple[nx.DiGraph, dict[tuple[str, str], list[str]]]:
    graph, where = nx.DiGraph(), {}
    for f, tree in _modules(PKG):
        rel = f.relative_to(PKG).parts
        if len(rel) < 2:
            continue  # top-level modules (types, errors, settings, dialogue, cli) are not subpackages
        src = rel[0]
        graph.add_node(src)
        for mod, line in _imported(f, tree):
            dst = _subpackage(mod)
            if dst and dst != src:
                graph.add_edge(src, dst)
                where.setdefault((src, dst), []).append(f"{f.relative_to(ROOT)}:{line}")
    return graph, where


def test_stage_packages_never_touch_the_warehouse():
    hits = []
    for sub in STAGE_PACKAGES:
        for f in (PKG / sub).rglob("*.py"):
            for i, line in enumerate(f.read_text().splitlines(), 1):
                if "autoforge.warehouse" in line:
                    hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "stage packages must take and return records (the pipeline reads and writes):\n" + "\n".join(hits)
    graph, where = subpackage_graph()
    for sub in STAGE_PACKAGES:
        for bad in ("warehouse", "pipeline"):
            assert not graph.has_edge(sub, bad), where.get((sub, bad))


def test_no_import_cycles_between_subpackages():
    graph, where = subpackage_graph()
    cycles = list(nx.simple_cycles(graph))
    detail = [" -> ".join(c + [c[0]]) + ": " + "; ".join(
        f"{a}->{b} at {where[(a, b)][0]}" for a, b in zip(c, c[1:] + c[:1])) for c in cycles]
    assert not cycles, "subpackages import each other:\n" + "\n".join(detail)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    src = "def f():\n    from autoforge.rl.policy import load_policy\n    from . import engine\n"
    tree = ast.parse(src)
    fake = PKG / "rollout" / "x.py"
    names = [m for m, _ in _imported(fake, tree)]
    assert "autoforge.rl.policy" in names and "autoforge.rollout" in names


WAREHOUSE_HOMES = (PKG / "pipeline", PKG / "warehouse")


def _warehouse_imports(f: Path, tree: ast.AST) -> list[str]:
    """``file:line: module`` for every import of the warehouse in ``f`` (inside functions too)."""
    lines: dict[int, str] = {}
    for mod, line in _imported(f, tree):
        if mod == "autoforge.warehouse" or mod.startswith("autoforge.warehouse."):
            lines.setdefault(line, mod)  # the module itself comes before the names it gives
    return [f"{f.relative_to(ROOT)}:{line}: {mod}" for line, mod in sorted(lines.items())]


def test_only_the_pipeline_and_the_warehouse_import_the_warehouse():
    hits = []
    for base in (PKG, ROOT / "flows", ROOT / "benchmarks"):
        for f, tree in _modules(base):
            if not any(home in f.parents for home in WAREHOUSE_HOMES):
                hits += _warehouse_imports(f, tree)
    assert not hits, ("read and write the warehouse through autoforge.pipeline (corpus, export, admin):\n"
                      + "\n".join(sorted(set(hits))))


def test_the_warehouse_check_sees_every_form_of_import():
    src = ("import autoforge.warehouse.engine\nfrom autoforge import warehouse\n"
           "def f():\n    from autoforge.warehouse.store import query\n")
    fake = PKG / "cli" / "x.py"
    assert [h.rsplit(": ", 1)[1] for h in _warehouse_imports(fake, ast.parse(src))] == [
        "autoforge.warehouse.engine", "autoforge.warehouse", "autoforge.warehouse.store"]


OUTSIDE = re.compile(r"DESIGN\.md|PAPER_NOTES|STYLE\.md|STACK_NOTES|\bshared/|\.\./")


def test_nothing_points_outside_the_repository():
    hits = []
    for base in (PKG, ROOT / "flows"):
        for f in base.rglob("*.py"):
            for i, line in enumerate(f.read_text().splitlines(), 1):
                m = OUTSIDE.search(line)
                if m and not re.search(r"docs/[\w./-]*" + re.escape(m.group(0)), line):
                    hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "cite docs/ inside the repository instead:\n" + "\n".join(hits)
    for cited in {m for base in (PKG, ROOT / "flows") for f in base.rglob("*.py")
                  for m in re.findall(r"docs/[\w-]+\.md", f.read_text())}:
        assert (ROOT / cited).is_file(), f"{cited} is cited but missing"


def test_every_suggested_command_exists():
    from autoforge.cli import COMMANDS

    said = re.compile(r"`autoforge ([a-z][a-z-]*)")
    missing = []
    for base in (PKG, ROOT / "flows"):
        for f, tree in _modules(base):
            for n in ast.walk(tree):
                if isinstance(n, ast.Constant) and isinstance(n.value, str):
                    for cmd in said.findall(n.value):
                        if cmd not in COMMANDS:
                            missing.append(f"{f.relative_to(ROOT)}:{n.lineno}: `autoforge {cmd}`")
    assert not missing, "messages suggest commands that do not exist:\n" + "\n".join(missing)


MAX_LINES = 700  # a module a newcomer reads in one sitting; split a bigger one by concern


def test_no_source_file_is_over_700_lines():
    big = [f"{f.relative_to(ROOT)}: {n} lines" for d in ("autoforge", "flows", "benchmarks")
           for f in sorted((ROOT / d).rglob("*.py")) if (n := len(f.read_text().splitlines())) > MAX_LINES]
    assert not big, f"split these by concern (at most {MAX_LINES} lines each):\n" + "\n".join(big)


def _module_name(f: Path) -> str:
    parts = ["autoforge", *f.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycles_between_modules():
    """Inside a subpackage too (envs/rules.py <-> envs/schema_offline.py was one). ``from P import m``
    counts as an import of the module P.m when there is one, not of the package P."""
    modules = {_module_name(f): f for f in PKG.rglob("*.py")}
    graph = nx.DiGraph()
    for name, f in modules.items():
        graph.add_node(name)
        tree = ast.parse(f.read_text(), filename=str(f))
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
                subs = [f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in modules]
                targets = subs if len(subs) == len(n.names) else [n.module, *subs]
            else:
                continue
            for t in targets:
                while t not in modules and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in modules and t != name and not name.startswith(t + "."):
                    graph.add_edge(name, t)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"modules that import each other (directly or through a chain): {cycles}"
