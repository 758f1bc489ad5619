"""The README's commands run as shown, and the docs point only at things that exist.

What is checked: the README is under 200 lines and starts with the two set-up commands; its
commands run (below); a command that needs an extra comes after that extra's install; every
`autoforge X` of its command table is a real subcommand; every relative link (and its `#anchor`)
in README.md, benchmarks/RESULTS.md and docs/*.md resolves; every module path the docs name
exists; docs/layout.md has a heading for every package and names only files that exist.

The README's ```bash blocks are its commands. Each command is classified here, and a command
this file does not know fails the test, so a new command in the README needs a rule below:

* the two set-up commands are not run (they create the venv this test runs in; CI runs the test
  one through `.ci/run`, whose command must be the README's);
* `.venv/bin/pip install -e ".[EXTRA]"` is not run (no network): EXTRA must be an extra of
  pyproject.toml, and the test venv (`.[dev]`) holds every extra's packages;
* `autoforge demo` and `autoforge train` are too slow for the suite: they run with `--help`, and
  train's `--set FIELD=VALUE` pairs must make a valid TrainConfig;
* everything else runs as written, block after block in one bash script (`set -euo pipefail`) in
  a temporary folder, with `.venv/bin/` meaning the bin folder of the Python running the tests
  (marked `slow`: the factory starts Prefect's temporary server); then every command of a guide's
  ```bash block written as `.venv/bin/autoforge ...` runs on the tour's warehouse.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent

SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/autoforge demo",
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev]" && .venv/bin/python -m pytest -q',
)
SHELL = {"export", "mkdir", "cat"}  # the plain shell steps the tour uses to write a doc
SLOW = {"demo", "train"}  # run with --help only


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def commands(block: str) -> list[str]:
    """The block's commands, one per line; a here-document's body belongs to its command."""
    out: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        here = re.search(r"<<'?(\w+)'?", line)
        if here:
            body = [line]
            for more in lines:
                body.append(more)
                if more.strip() == here.group(1):
                    break
            line = "\n".join(body)
        out.append(line)
    return out


def classify(command: str) -> str:
    """'setup' | 'extra' | 'slow' | 'run'; anything else raises, naming the command."""
    if command in SETUP:
        return "setup"
    words = shlex.split(command.split("\n")[0], comments=True)
    if len(words) == 4 and words[:3] == [".venv/bin/pip", "install", "-e"] and re.fullmatch(r"\.\[[\w,-]+\]", words[3]):
        return "extra"
    if words and words[0] == ".venv/bin/autoforge" and len(words) > 1:
        return "slow" if words[1] in SLOW else "run"
    if words and words[0] in SHELL:
        return "run"
    raise AssertionError(f"README command not covered by tests/test_readme.py: {command!r} (add a rule there)")


def readme_commands() -> list[str]:
    return [c for block in bash_blocks(README.read_text()) for c in commands(block)]


def test_readme_is_a_short_guide_with_the_two_setup_commands_first():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    cmds = readme_commands()
    assert tuple(cmds[:2]) == SETUP
    ci = (ROOT / ".ci" / "run").read_text()
    assert SETUP[1] in ci, ".ci/run must run the README's test command"


def test_every_readme_command_is_covered():
    kinds = [classify(c) for c in readme_commands()]
    assert kinds.count("setup") == 2 and "run" in kinds


# What a command needs beyond `pip install -e .`: the README installs the extra before it.
NEEDS_EXTRA = {"--format hf": "hf", "--format verl": "hf", "autoforge mcp": "mcp"}


def test_a_command_that_needs_an_extra_comes_after_its_install():
    installed: set[str] = set()
    for command in readme_commands():
        installed |= set(re.findall(r'"\.\[([\w-]+)\]"', command))
        for needle, extra in NEEDS_EXTRA.items():
            if needle in command and classify(command) != "setup":
                assert extra in installed, f"{command!r} needs `pip install -e \".[{extra}]\"` before it"


def pyproject_extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+) = \[", section, flags=re.M))


def test_extras_named_in_the_docs_exist():
    extras = pyproject_extras()
    for doc in DOCS:
        text = doc.read_text()
        named = {e for group in re.findall(r'"\.\[([\w,-]+)\]"', text) for e in group.split(",")}
        for line in re.findall(r"^Extras: (.*)$", text, flags=re.M):
            named |= set(re.findall(r"`([\w-]+)`", line))
        assert named <= extras, f"{doc.name} names extras pyproject.toml lacks: {sorted(named - extras)}"


def test_train_settings_in_the_readme_are_valid():
    from autoforge.rl.config import TrainConfig

    for command in readme_commands():
        words = shlex.split(command.split("\n")[0], comments=True)
        if words[:2] == [".venv/bin/autoforge", "train"]:
            sets = dict(w.split("=", 1) for w in words[words.index("--set") + 1::2] if "=" in w)
            assert sets, command
            TrainConfig(**sets)  # pydantic's lax mode reads the strings as the CLI does


def test_the_commands_table_names_real_subcommands():
    from autoforge.cli import main

    table = re.findall(r"^\| `autoforge ([\w-]+)", README.read_text(), flags=re.M)
    assert len(table) >= 10
    for sub in table:
        with pytest.raises(SystemExit) as done:
            main([sub, "--help"])
        assert done.value.code == 0, sub


@pytest.mark.slow  # ~45 s: the factory starts Prefect's temporary server
@pytest.mark.skipif(not (BIN / "autoforge").exists(), reason="the autoforge script is not beside this Python")
def test_readme_commands_run_as_shown(tmp_path):
    script = ["set -euo pipefail"]
    for command in readme_commands():
        kind = classify(command)
        if kind in ("setup", "extra"):
            continue
        if kind == "slow":
            words = shlex.split(command, comments=True)
            command = shlex.join(words[:2]) + " --help"
        script.append(command.replace(".venv/bin/", f"{BIN}/"))
    env = {**os.environ, "AUTOFORGE_WAREHOUSE": str(tmp_path / "default.duckdb"),
           "PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    res = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert "verified" in res.stdout
    assert (tmp_path / "my_tasks.parquet").is_file()
    assert (tmp_path / "my_tasks_hf" / "README.md").is_file()

    # The guides' blocks written with `.venv/bin/autoforge` run as shown too, on the tour's warehouse
    # (blocks with a bare `autoforge` assume an activated venv and usually a server: not run here).
    guide = [c for doc in DOCS[1:] for block in bash_blocks(doc.read_text()) for c in commands(block)
             if c.startswith(".venv/bin/autoforge ")]
    assert guide, "no guide command runs as shown"
    script = ["set -euo pipefail", "export AUTOFORGE_WAREHOUSE=my_tools.duckdb"]
    script += [c.replace(".venv/bin/", f"{BIN}/") for c in guide]
    res = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


def _anchors(path: Path) -> set[str]:
    text = path.read_text()
    ids = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        ids.add(slug)
    return ids


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to nothing: {broken}"


def test_the_layout_map_names_every_room_and_only_files_that_exist():
    text = (ROOT / "docs" / "layout.md").read_text()
    pkg = ROOT / "autoforge"
    rooms = {m for m in re.findall(r"^\*\*`autoforge/([\w/]+)/`\*\*", text, flags=re.M)}
    packages = {str(p.parent.relative_to(pkg)) for p in pkg.rglob("__init__.py") if p.parent != pkg}
    assert packages <= rooms, f"docs/layout.md has no heading for {sorted(packages - rooms)}"
    missing, room, listed = [], None, set()
    for line in text.splitlines():
        head = re.match(r"^\*\*`autoforge/([\w/]+)/`\*\*", line)
        if head:
            room = pkg / head.group(1)
        elif line.startswith("## "):
            room = None
        item = re.match(r"^- `([\w./-]+)`", line)
        if item:
            name = item.group(1)
            path = ROOT / name if "/" in name or room is None else room / name
            listed.add(path.resolve())
            if not path.exists():
                missing.append(name)
    missing += [r for r in rooms if not (pkg / r).is_dir()]
    assert not missing, f"docs/layout.md names files that do not exist: {missing}"
    unlisted = sorted(str(f.relative_to(ROOT)) for r in rooms if (pkg / r).is_dir() for f in (pkg / r).glob("*.py")
                      if f.name != "__init__.py" and f.resolve() not in listed)
    assert not unlisted, f"docs/layout.md does not list these modules of its rooms (one line each): {unlisted}"


ROOMS = "autoforge|flows|tests|benchmarks|envs|dags|tasks|tooldocs|rl|rollout|pipeline|warehouse|integrations|llm|domain|sql"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_paths_named_in_the_docs_exist(doc):
    """`envs/code/compute.py`, `autoforge/sql/081_tasks_keys.sql`: a module moved leaves no stale name."""
    stale = []
    for name in sorted(set(re.findall(rf"(?<![\w/.])((?:{ROOMS})/[\w/-]*\w\.(?:py|sql))", doc.read_text()))):
        here = [ROOT / name, ROOT / "autoforge" / name]
        if "NNN_" in name:  # the migrations' naming pattern, not a file
            continue
        if not any(p.exists() for p in here):
            stale.append(name)
    assert not stale, f"{doc.relative_to(ROOT)} names files that do not exist: {stale}"
