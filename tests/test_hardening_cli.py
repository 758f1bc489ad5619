"""Bad input is refused with one clear line and a non-zero exit, before anything is written:
every AUTOFORGE_* setting, every numeric flag, ``train --set`` / ``--config``, the flows'
parameters, and operating-system failures (full disk, permission denied, read-only disk)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa

from autoforge.cli import main
from autoforge.errors import ConfigError
from autoforge.settings import PARAMS, VARS, Settings, get_settings

BAD = ("abc", "nan", "inf", "-1", "0", "", "   ")
# The bad values each variable accepts after all (a retry count of 0, a file named "inf", ...).
ACCEPTED = {
    "AUTOFORGE_LLM_MAX_RETRIES": {"0"},
    "AUTOFORGE_LLM_MAX_REPAIRS": {"0"},
    "AUTOFORGE_TIMING": {"0"},
    "AUTOFORGE_ZERO_ON_RULE_BREAK": {"0"},
    "AUTOFORGE_BOUNDARY_SHARE": {"0"},
    "AUTOFORGE_WAREHOUSE": {"abc", "nan", "inf", "-1", "0"},
    "AUTOFORGE_OPENAI_API_KEY": {"abc", "nan", "inf", "-1", "0"},
    "AUTOFORGE_OPENAI_MODEL": {"abc", "nan", "inf", "-1", "0"},
}
CASES = [(v.env, bad) for v in VARS.values() for bad in BAD if bad not in ACCEPTED.get(v.env, set())]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for v in VARS.values():
        if v.env != "AUTOFORGE_LOCK_TIMEOUT":  # conftest's short lock wait stays
            monkeypatch.delenv(v.env, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A warehouse with one ready environment and its verified tasks (the small bundled run)."""
    wh = tmp_path_factory.mktemp("built") / "w.duckdb"
    assert main(["factory", "--no-prefect", "--max-envs", "1", "--tasks-per-env", "10", "--warehouse", str(wh)]) == 0
    return wh


@pytest.fixture
def wh(built, tmp_path) -> str:
    path = tmp_path / "w.duckdb"
    shutil.copy(built, path)
    return str(path)


def snapshot(path: str) -> dict[str, list]:
    """Every row of every table (sorted), to show that nothing was written or lost."""
    con = duckdb.connect(path, read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_type = 'BASE TABLE' ORDER BY 1").fetchall()]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"').fetchall())) for t in tables}
    finally:
        con.close()


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# --------------------------------------------------------------------------- AUTOFORGE_* settings


def test_every_setting_is_covered_and_defaults_are_valid():
    assert {env for env, _ in CASES} == {v.env for v in VARS.values()}
    s = get_settings()
    assert (s.backend, s.tool_timeout_s, s.tool_memory_mb, s.timing) == ("offline", 2.0, 512, False)


VARS_BY_ENV = {v.env: v for v in VARS.values()}


@pytest.mark.parametrize("var, value", CASES)
def test_bad_setting_is_a_config_error_naming_variable_value_and_range(var, value, monkeypatch):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as e:
        get_settings()
    msg = str(e.value)
    shown = f"<hidden, {len(value)} characters>" if VARS_BY_ENV[var].secret else value
    assert var in msg and repr(shown) in msg and "e.g. " in msg and "\n" not in msg


@pytest.mark.parametrize("var, value", [("AUTOFORGE_TOOL_TIMEOUT", "abc"), ("AUTOFORGE_LOCK_TIMEOUT", "nan"),
                                        ("AUTOFORGE_TOOL_MEMORY_MB", "0"), ("AUTOFORGE_BACKEND", "gpt"),
                                        ("AUTOFORGE_WAREHOUSE", ""), ("AUTOFORGE_STAGE_WORKERS", "-1"),
                                        ("AUTOFORGE_TIMING", "maybe")])
def test_cli_refuses_a_bad_setting_with_one_line_before_writing(var, value, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(var, value)
    target = tmp_path / "never.duckdb"
    assert main(["init", "--warehouse", str(target)]) == 2
    assert var in one_error_line(capsys.readouterr().err)
    assert not target.exists()


def test_settings_in_code_obey_the_same_ranges():
    with pytest.raises(ConfigError, match=r"tool_timeout_s \(AUTOFORGE_TOOL_TIMEOUT\).*\[0.01, 600\]"):
        Settings(tool_timeout_s=-1)
    with pytest.raises(ConfigError, match="AUTOFORGE_TOOL_MEMORY_MB"):
        get_settings().with_(tool_memory_mb=0)
    assert get_settings(llm_max_repairs=0).llm_max_repairs == 0


def test_fallback_variables_are_named_and_an_empty_one_is_unset(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert get_settings().openai_base_url is None
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000")
    with pytest.raises(ConfigError, match=r"^OPENAI_BASE_URL must be .*unset OPENAI_BASE_URL"):
        get_settings()
    monkeypatch.setenv("AUTOFORGE_OPENAI_BASE_URL", " http://127.0.0.1:9/v1 ")
    assert get_settings().openai_base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("var, value", [("AUTOFORGE_TOOL_TIMEOUT", "-1"), ("AUTOFORGE_TOOL_MEMORY_MB", "0")])
def test_bad_sandbox_limit_leaves_a_ready_environment_untouched(var, value, wh, monkeypatch, capsys):
    before = snapshot(wh)
    assert any("'ready'" in row for row in before["environments"])
    monkeypatch.setenv(var, value)
    assert main(["synthesize", "--warehouse", wh]) == 2
    assert var in one_error_line(capsys.readouterr().err)
    assert snapshot(wh) == before


def test_bad_setting_through_the_installed_command_has_no_traceback(wh):
    exe = Path(sys.executable).parent / "autoforge"
    before = snapshot(wh)
    res = subprocess.run([str(exe), "synthesize", "--warehouse", wh], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "AUTOFORGE_TOOL_TIMEOUT": "abc"})
    assert res.returncode == 2
    assert "AUTOFORGE_TOOL_TIMEOUT" in one_error_line(res.stderr)
    assert snapshot(wh) == before


def test_timing_setting_prints_the_duration(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AUTOFORGE_TIMING", "yes")
    assert main(["init", "--warehouse", str(tmp_path / "t.duckdb")]) == 0
    assert "[init took" in capsys.readouterr().err


# --------------------------------------------------------------------------- numeric flags


FLAG_CASES = [
    (["eval", "--max-turns", "-1"], "--max-turns"),
    (["eval", "--trials", "0"], "--trials"),
    (["eval", "--limit", "0"], "--limit"),
    (["eval", "--concurrency", "abc"], "--concurrency"),
    (["eval", "--user-error-rate", "nan"], "--user-error-rate"),
    (["eval", "--user-error-rate", "1.5"], "--user-error-rate"),
    (["eval", "--seed", "-1"], "--seed"),
    (["factory", "--tasks-per-env", "0"], "--tasks-per-env"),
    (["factory", "--tasks-per-env", "1e3"], "--tasks-per-env"),
    (["factory", "--walks", "-5"], "--walks"),
    (["factory", "--min-len", "0"], "--min-len"),
    (["factory", "--max-len", "inf"], "--max-len"),
    (["factory", "--attempts-per-task", ""], "--attempts-per-task"),
    (["factory", "--max-envs", "0"], "--max-envs"),
    (["factory", "--seed", "3000000000"], "--seed"),
    (["synthesize", "--max-envs", "-1"], "--max-envs"),
    (["demo", "--train-steps", "-1"], "--train-steps"),
    (["demo", "--tasks-per-env", "abc"], "--tasks-per-env"),
    (["serve", "--limit", "0"], "--limit"),
    (["init", "--warehouse", " "], "--warehouse"),
]


@pytest.mark.parametrize("argv, flag", FLAG_CASES)
def test_bad_numeric_flag_is_a_usage_error_naming_flag_and_range(argv, flag, wh, capsys):
    before = snapshot(wh)
    with pytest.raises(SystemExit) as e:
        main([*argv, "--warehouse", wh] if "--warehouse" not in argv else argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be" in err and "e.g." in err and "Traceback" not in err
    assert snapshot(wh) == before


@pytest.mark.parametrize("agent, says", [("hf:", "names no model directory"), ("hf:/", "no config.json")])
def test_local_agent_without_a_model_is_one_clear_error(agent, says, wh, capsys):
    before = snapshot(wh)
    assert main(["eval", "--agent", agent, "--limit", "1", "--warehouse", wh]) == 2
    assert says in one_error_line(capsys.readouterr().err)
    assert snapshot(wh) == before


def test_every_range_has_a_valid_example():
    for name, rng in PARAMS.items():
        assert rng.problem(rng.example) is None, name


def test_min_len_above_max_len_is_refused_before_writing(wh, capsys):
    before = snapshot(wh)
    assert main(["factory", "--no-prefect", "--min-len", "7", "--max-len", "3", "--warehouse", wh]) == 2
    assert "--min-len / --max-len" in one_error_line(capsys.readouterr().err)
    assert snapshot(wh) == before


# --------------------------------------------------------------------------- train --set / --config


@pytest.mark.parametrize("argv, says", [
    (["--set", "bogus=1"], "unknown TrainConfig field(s) bogus; valid fields: model_path"),
    (["--set", "stepz=1"], "did you mean steps?"),
    (["--set", "steps=abc"], "steps is int >= 0 (default 10), e.g. --set steps=10"),
    (["--set", "lr=inf"], "finite"),
    (["--set", "rollouts_per_task=1"], "greater than or equal to 2"),
    (["--set", "device=gpu"], "device"),
    (["--set", "tiny_num_heads=5"], "divisible"),
    (["--config", "/no/such/train.yaml"], "does not exist"),
])
def test_bad_training_config_is_one_clear_error(argv, says, wh, capsys):
    before = snapshot(wh)
    assert main(["train", "--warehouse", wh, *argv]) == 2
    assert says in one_error_line(capsys.readouterr().err)
    assert snapshot(wh) == before


@pytest.mark.parametrize("text", ["noequals", "=3", "two words=1"])
def test_set_without_field_equals_value_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--set", text])
    assert e.value.code == 2
    assert "argument --set: must be FIELD=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("content, says", [
    (b"- steps\n- 3\n", "must be a mapping of TrainConfig fields"),
    (b"steps: [unclosed\n", "not valid YAML"),
    (b"\xff\xfe steps: 3\n", "not UTF-8"),
    (b"stepz: 3\n", "unknown field(s) stepz"),
])
def test_unreadable_config_files(content, says, tmp_path):
    from autoforge.pipeline.train import train_config

    p = tmp_path / "c.yaml"
    p.write_bytes(content)
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        train_config(p)
    with pytest.raises(ConfigError, match="is a directory"):
        train_config(tmp_path)
    with pytest.raises(ConfigError, match="not a regular file"):  # /dev/zero would never end
        train_config("/dev/zero")


def test_overrides_read_typed_in_strings_as_the_field_type():
    from autoforge.pipeline.train import train_config

    cfg = train_config(None, {"steps": "3", "envs": "airline,retail", "eval_at": "[start, end]", "model_path": "null",
                              "adam_betas": "[0.9, 0.95]", "mask_user_errors": "false"}, where="--set")
    assert (cfg.steps, cfg.envs, cfg.eval_at, cfg.model_path) == (3, ["airline", "retail"], ["start", "end"], None)
    assert cfg.adam_betas == (0.9, 0.95) and cfg.mask_user_errors is False
    assert train_config(None, {"steps": 4}).steps == 4  # a flow's typed overrides
    with pytest.raises(ConfigError, match=r"overrides steps=-1: .* e.g. \{'steps': 10\}"):
        train_config(None, {"steps": -1})


# --------------------------------------------------------------------------- flows


def test_flows_check_settings_and_parameters(monkeypatch):
    from autoforge.pipeline import GenerateParams, SampleParams
    from flows._common import check_flow_inputs, stage_task_runner

    check_flow_inputs(SampleParams(seed=0, tasks_per_env=10, min_len=2, max_len=5, max_envs=None))
    check_flow_inputs(GenerateParams(test_fraction=0.2))
    for bad, says in ((SampleParams(tasks_per_env=0), "tasks_per_env must be a positive"),
                      (SampleParams(seed=-1), "seed must be >= 0"), (GenerateParams(test_fraction=1.5), "test_fraction"),
                      (SampleParams(dag_variants=0), "dag_variants"),
                      (SampleParams(min_len=6, max_len=2), "min_len <= max_len")):
        with pytest.raises(ConfigError, match=says):
            check_flow_inputs(bad)
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "0")
    with pytest.raises(ConfigError, match="AUTOFORGE_STAGE_WORKERS"):
        stage_task_runner()
    with pytest.raises(ConfigError, match="AUTOFORGE_STAGE_WORKERS"):
        check_flow_inputs()
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "3")
    assert stage_task_runner()._max_workers == 3


# --------------------------------------------------------------------------- operating-system failures


def _failing_inserts(monkeypatch, exc: BaseException) -> None:
    """Every INSERT the warehouse runs fails with ``exc`` (inside the write's transaction)."""
    real = sa.engine.Connection.execute

    def execute(self, statement, *args, **kw):
        if isinstance(statement, sa.sql.dml.Insert) or str(statement).lstrip().upper().startswith("INSERT"):
            raise exc
        return real(self, statement, *args, **kw)

    monkeypatch.setattr(sa.engine.Connection, "execute", execute)


def _wal(wh: str) -> str:
    return wh + ".wal"


@pytest.mark.parametrize("make", [
    lambda wh: OSError(errno.ENOSPC, "No space left on device", _wal(wh)),
    lambda wh: duckdb.IOException(f'Could not write file "{_wal(wh)}": No space left on device'),
    lambda wh: sa.exc.OperationalError("INSERT", {}, duckdb.IOException(
        f'Could not write file "{_wal(wh)}": No space left on device')),
], ids=["OSError", "duckdb.IOException", "sqlalchemy-wrapped"])
def test_full_disk_is_one_line_exit_1_and_loses_nothing(make, wh, monkeypatch, capsys):
    before = snapshot(wh)
    _failing_inserts(monkeypatch, make(wh))
    assert main(["synthesize", "--max-envs", "1", "--warehouse", wh]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "disk full" in line and f"free space at {Path(wh).parent}" in line and "--warehouse" in line
    assert "lost nothing already written" in line
    monkeypatch.undo()
    assert snapshot(wh) == before


@pytest.mark.parametrize("code, says", [(errno.EACCES, "permission denied"), (errno.EROFS, "read-only file system"),
                                        (errno.EIO, "Input/output error")])
def test_other_os_errors_are_one_line_and_lose_nothing(code, says, wh, monkeypatch, capsys):
    before = snapshot(wh)
    _failing_inserts(monkeypatch, OSError(code, os.strerror(code), _wal(wh)))
    assert main(["synthesize", "--max-envs", "1", "--warehouse", wh]) in (1, 2)
    line = one_error_line(capsys.readouterr().err)
    assert says in line and _wal(wh) in line
    monkeypatch.undo()
    assert snapshot(wh) == before


def test_os_error_outside_the_warehouse(wh, monkeypatch, tmp_path, capsys):
    import autoforge.warehouse.export as export

    def refuse(*args, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "out.csv"))

    monkeypatch.setattr(export, "export_relation", refuse)
    assert main(["export", "runs", "--format", "csv", "--out", str(tmp_path / "out.csv"), "--warehouse", wh]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "permission denied" in line and "--warehouse / --out" in line


class _Saves:
    """A stand-in model whose weights file fails to write the way safetensors does on a full disk."""

    def __init__(self, fail: bool):
        self.fail = fail

    def save_pretrained(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "config.json").write_text("{}")
        if self.fail:
            raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
        (Path(path) / "model.safetensors").write_bytes(b"weights")


def test_a_model_save_on_a_full_disk_is_enospc_and_leaves_the_last_copy_whole(tmp_path):
    from autoforge.rl.checkpoint import save_model_dir

    out = tmp_path / "reference"
    save_model_dir(out, _Saves(fail=False))
    with pytest.raises(OSError) as e:
        save_model_dir(out, _Saves(fail=True))
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]  # the good copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference"]  # no half-written .tmp- left


def test_a_full_disk_while_training_is_one_line_exit_1(wh, monkeypatch, capsys):
    from autoforge.rl import checkpoint

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", "/ck")

    monkeypatch.setattr(checkpoint, "save_model_dir", full)
    monkeypatch.setattr("autoforge.rl.policy.save_model_dir", full)
    code = main(["train", "--warehouse", wh, "--set", "steps=1", "--set", "sft_epochs=1"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: disk full") and "Traceback" not in err, err


@pytest.mark.parametrize("var, value, says", [
    ("AUTOFORGE_LOCK_TIMEOUT", "٥", "not a number"),            # Arabic-Indic digit
    ("AUTOFORGE_STAGE_WORKERS", "５", "not a number"),           # full-width digit
    ("AUTOFORGE_LOCK_TIMEOUT", "1_000", "not a number"),
    ("AUTOFORGE_LOCK_TIMEOUT", "\x0b5", "control character"),
    ("AUTOFORGE_LOCK_TIMEOUT", "5\x1f", "control character"),
    ("AUTOFORGE_BACKEND", "off\x07line", "control character"),
    ("AUTOFORGE_OPENAI_MODEL", "model\nX-Injected: 1", "control character"),
    ("AUTOFORGE_OPENAI_BASE_URL", "http://a b", "not an http(s) URL"),
    ("AUTOFORGE_OPENAI_BASE_URL", "http://h:99999", "not an http(s) URL"),
    ("AUTOFORGE_OPENAI_BASE_URL", "http://h:abc", "not an http(s) URL"),
    ("AUTOFORGE_OPENAI_BASE_URL", "http://h\\@evil", "not an http(s) URL"),
])
def test_odd_characters_in_a_setting_are_refused(var, value, says, monkeypatch):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=var) as e:
        get_settings()
    assert says in str(e.value)


def test_a_refused_setting_never_shows_a_secret(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_OPENAI_API_KEY", "sk-live-123\nX: y")
    with pytest.raises(ConfigError) as e:
        get_settings()
    assert "sk-live" not in str(e.value) and "hidden" in str(e.value)
    monkeypatch.delenv("AUTOFORGE_OPENAI_API_KEY")
    monkeypatch.setenv("AUTOFORGE_OPENAI_BASE_URL", "ftp://user:hunter2@host")
    with pytest.raises(ConfigError) as e:
        get_settings()
    assert "hunter2" not in str(e.value) and "user:***@host" in str(e.value)


def test_surrounding_blanks_are_trimmed_and_a_plain_sign_is_fine(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_LOCK_TIMEOUT", " +5\n")
    monkeypatch.setenv("AUTOFORGE_OPENAI_BASE_URL", "http://127.0.0.1:8000/v1 ")
    s = get_settings()
    assert s.lock_timeout_s == 5 and s.openai_base_url == "http://127.0.0.1:8000/v1"


def test_an_unsupported_warehouse_setting_is_refused_even_under_the_flag(wh, monkeypatch, capsys):
    monkeypatch.setenv("AUTOFORGE_WAREHOUSE", "sqlite:///x.db")
    assert main(["sql", "--warehouse", wh, "SELECT 1"]) == 2
    assert "sqlite:// is neither DuckDB nor PostgreSQL" in capsys.readouterr().err
