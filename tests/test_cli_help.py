"""The command line as a newcomer meets it: help that renders, every exit code listed, errors with
the subcommand's usage, defaults taken from the stage params models, and a missing optional
extra said in one line with the pip command (exit 2) instead of a traceback."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from autoforge.cli import COMMANDS, build_parser, main
from autoforge.cli.failures import EXTRAS

ROOT = Path(__file__).resolve().parents[1]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_every_command_has_a_parser_and_its_help_renders(capsys):
    subs = _subcommands()
    assert set(subs) == set(COMMANDS)
    for name in subs:
        with pytest.raises(SystemExit) as stop:
            main([name, "--help"])
        assert stop.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: autoforge {name}"), name
        assert "%%" not in text and "%(" not in text, f"autoforge {name} --help shows a format escape"
    assert "95% confidence" in subs["eval"].format_help()


def test_top_help_lists_every_exit_code_of_the_hardening_guide(capsys):
    guide = (ROOT / "docs" / "hardening.md").read_text()
    listed = re.search(r"Exit codes: (.*?)\n\n", guide, re.S).group(1)
    codes = re.findall(r"(?:^|; )(\d+) ", " ".join(listed.split()))
    assert {"0", "1", "2", "3", "130"} <= set(codes)
    with pytest.raises(SystemExit):
        main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    for code in codes:
        assert re.search(rf"(?:: |; ){code} ", top), f"exit code {code} is missing from `autoforge --help`"


@pytest.mark.parametrize("argv", [["sql", "--bogus", "SELECT 1"], ["factory", "--tasks-per-envs", "3"],
                                  ["export", "runs", "--format", "csv", "--out", "x.csv", "extra"]])
def test_an_unknown_flag_shows_the_subcommands_usage(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: autoforge {argv[0]} ") and "unrecognized arguments" in err


def test_flag_defaults_come_from_the_params_models():
    from autoforge.pipeline import FactoryParams
    from autoforge.pipeline.evaluate import EvalParams

    subs = _subcommands()
    for cmd in ("factory", "demo"):
        got = {a.dest: a.default for a in subs[cmd]._actions}
        assert got["tasks_per_env"] == FactoryParams.model_fields["tasks_per_env"].default, cmd
        assert got["seed"] == FactoryParams.model_fields["seed"].default, cmd
    evals = {a.dest: a.default for a in subs["eval"]._actions}
    for name in ("agent", "user", "trials", "concurrency", "user_error_rate", "judge", "max_turns", "seed"):
        assert evals[name] == EvalParams.model_fields[name].default, name


def test_table_columns_say_which_stage_dropped():
    from autoforge.cli.stages import top_drops

    assert top_drops({"generate_drops": "gold_call_error (3)", "sample_drops": "x (1)"}) == "generate: gold_call_error (3)"
    assert top_drops({"generate_drops": None, "sample_drops": "no_path (2)", "verify_drops": None}) == "sample: no_path (2)"
    assert top_drops({"generate_drops": None, "sample_drops": None, "verify_drops": None}) == "-"


def _hide(monkeypatch, *packages: str) -> None:
    """Make ``import PACKAGE`` fail as it does when the package is not installed."""
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            monkeypatch.delitem(sys.modules, name)
    for p in packages:
        monkeypatch.setitem(sys.modules, p, None)


def _says_extra(line: str, extra: str) -> None:
    assert f'pip install -e ".[{extra}]"' in line and f'pip install "autoforge[{extra}]"' in line, line


@pytest.mark.parametrize("fmt", ["hf", "verl"])
def test_export_to_a_folder_without_the_hf_extra(fmt, tmp_path, monkeypatch, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["init", "--warehouse", wh]) == 0
    capsys.readouterr()
    _hide(monkeypatch, "datasets", "pyarrow")
    out = tmp_path / "out"
    assert main(["export", "runs", "--format", fmt, "--out", str(out), "--warehouse", wh]) == 2
    line = _one_line(capsys.readouterr().err)
    _says_extra(line, "hf")
    assert f"--format {fmt}" in line and not out.exists()


def test_mcp_without_the_mcp_extra(tmp_path, monkeypatch, capsys):
    _hide(monkeypatch, "mcp", "mcp_types")
    assert main(["mcp", "--env", "mock_shop", "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    _says_extra(_one_line(capsys.readouterr().err), "mcp")


def test_factory_on_dask_without_the_dask_extra(tmp_path, monkeypatch, capsys):
    _hide(monkeypatch, "prefect_dask", "distributed", "dask")
    wh = tmp_path / "w.duckdb"
    assert main(["factory", "--task-runner", "dask", "--max-envs", "1", "--warehouse", str(wh)]) == 2
    _says_extra(_one_line(capsys.readouterr().err), "dask")
    assert not wh.exists()  # refused before any work


def test_postgres_without_the_postgres_extra(monkeypatch, capsys):
    _hide(monkeypatch, "psycopg")
    assert main(["init", "--warehouse", "postgresql://nobody@127.0.0.1:1/none"]) == 2
    assert "autoforge[postgres]" in _one_line(capsys.readouterr().err)


def test_any_lazy_import_of_an_extra_ends_in_one_line(monkeypatch, capsys):
    def needs_trl(args):
        import trl  # noqa: F401 - the import is the point

    _hide(monkeypatch, "trl")
    monkeypatch.setitem(COMMANDS, "init", needs_trl)
    assert main(["init"]) == 2
    line = _one_line(capsys.readouterr().err)
    _says_extra(line, "trl")
    assert "autoforge init" in line and "'trl'" in line
    assert set(EXTRAS) == {"hf", "mcp", "trl", "dask", "postgres"}


def test_the_demo_shows_how_it_was_run(monkeypatch, tmp_path):
    """Its closing hints name the script that ran (``.venv/bin/autoforge`` after the README's install),
    not a bare ``autoforge`` that is not on PATH."""
    from autoforge.cli.demo import invocation

    script = tmp_path / ".venv" / "bin" / "autoforge"
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "argv", [".venv/bin/autoforge", "demo"])
    assert invocation() == ".venv/bin/autoforge"
    monkeypatch.setenv("PATH", str(script.parent))
    script.chmod(0o755)
    assert invocation() == "autoforge"
    monkeypatch.setattr(sys, "argv", ["-c"])  # python -c / -m: no script, and none on PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    assert invocation().endswith(" -m autoforge")
