"""Hostile inputs (issue 15 item 7): every bad input is one line on stderr starting
`error:`, the right exit code, no traceback, within bounded time; no results directory
is left behind by bad input. In-process through click's CliRunner (fast); a few cases
that need a real process (signals, listening sockets) run as subprocesses, marked slow.
Hypothesis adds generated scenario documents."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.util.redact import redact, redact_text, redact_url
from tests.conftest import small_scenario

OK_YAML = yaml.safe_dump(small_scenario(turns=2))
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def _doc(**over: Any) -> str:
    return yaml.safe_dump(small_scenario(**{"turns": 2, **over}))


def _edit(text: str, **raw: str) -> str:
    """The OK scenario with top-level keys replaced by raw YAML text."""
    lines = [ln for ln in text.splitlines() if ln.split(":", 1)[0] not in raw]
    return "\n".join(lines + [f"{k}: {v}" for k, v in raw.items()]) + "\n"


# (id, scenario text or bytes) — each must be refused by `validate` and `run` alike.
BAD_SCENARIOS: list[tuple[str, str | bytes]] = [
    ("bool-turns", _edit(OK_YAML, turns="true")),
    ("bool-sessions", _edit(OK_YAML, sessions="yes")),
    ("inf-turns", _edit(OK_YAML, turns=".inf")),
    ("nan-think", _edit(OK_YAML, think_time_s=".nan")),
    ("huge-prompt", _edit(OK_YAML, first_prompt_tokens="1.0e12")),
    ("float-max-tokens", _edit(OK_YAML, max_tokens="1.0e30")),
    ("huge-seed", _edit(OK_YAML, seed="1" + "0" * 40)),
    ("huge-sessions", _edit(OK_YAML, sessions="10000000")),
    ("huge-turns", _edit(OK_YAML, turns="1000000000")),
    ("huge-deadline", _edit(OK_YAML, deadline_s="1.0e300")),
    ("zero-deadline", _edit(OK_YAML, deadline_s="0")),
    ("huge-context", _edit(OK_YAML, context_window_tokens="1.0e15")),
    ("neg-context", _edit(OK_YAML, context_window_tokens="-1")),
    ("lognormal-sigma", _doc(user_prompt_tokens={"dist": "lognormal", "median": 10,
                                                  "sigma": 1000})),
    ("normal-inf", _doc(user_prompt_tokens={"dist": "normal", "mean": 10, "std": float("inf")})),
    ("uniform-upside-down", _doc(user_prompt_tokens={"dist": "uniform", "low": 9, "high": 1})),
    ("dist-bool", _doc(user_prompt_tokens=True)),
    ("backoff-huge", _doc(retry={"backoff_s": 1e9})),
    ("attempts-bool", _doc(retry={"max_attempts": True})),
    ("jitter-2", _doc(retry={"jitter": 2})),
    ("rate-zero", _doc(limits={"requests_per_s": 0})),
    ("rate-huge", _doc(limits={"requests_per_s": 1e12})),
    ("in-flight-bool", _doc(limits={"max_in_flight": False})),
    ("timeout-inf", _doc(endpoint={"timeout_s": float("inf")})),
    ("arrival-rate-tiny", _doc(arrival={"pattern": "poisson", "rate_per_s": 1e-300})),
    ("weight-inf", _doc(turn_templates=[{"name": "a", "weight": float("inf"),
                                         "output_tokens": 10}])),
    ("weight-bool", _doc(turn_templates=[{"name": "a", "weight": True, "output_tokens": 10}])),
    ("error-rate-2", _doc(turn_templates=[{"name": "a", "weight": 1, "output_tokens": 10,
                                           "tool": {"kind": "read", "result_tokens": 5,
                                                    "error_rate": 2}}])),
    ("no-templates", _doc(turn_templates=[])),
    ("compaction-huge", _doc(compaction={"kind": "prune", "budget_tokens": 10**12})),
    ("system-tokens-huge", _doc(system={"tokens": 10**10})),
    ("tools-count-huge", _doc(tools={"count": 10**6, "tokens": 100})),
    ("duplicate-key", OK_YAML + "turns: 3\n"),
    ("duplicate-nested", "name: x\nretry:\n  backoff_s: 1\n  backoff_s: 2\n"),
    ("alias-bomb", BOMB),
    ("deep-list", "name: x\nturns: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("deep-map", "name: x\nretry: " + "{a: " * 200 + "1" + "}" * 200 + "\n"),
    ("non-scalar-key", "? [a, b]\n: 1\nname: x\n"),
    ("date-turns", _edit(OK_YAML, turns="2020-01-01")),
    ("not-utf8", OK_YAML.encode() + b"# \xff\xfe caf\xe9\n"),
    ("binary", b"\x00\x01\x02\x03" * 100),
    ("nul-in-text", "name: a\x00b\n"),
    ("empty", ""),
    ("only-comment", "# nothing\n"),
    ("top-level-list", "- a\n- b\n"),
    ("top-level-scalar", "42\n"),
    ("syntax", "name: x\nturns: [1, 2\n"),
    ("tabs", "name: x\n\tturns: 3\n"),
    ("unknown-key", _doc(turnz=3)),
    ("string-number", _doc(turns="many")),
    ("negative-sessions", _doc(sessions=-2)),
    ("python-tag", "name: !!python/object/apply:os.system [echo hi]\n"),
    ("long-key", "name: x\n" + "k" * 100_000 + ": 1\n"),
]


def _one_line(r: Any, code: int = 2) -> str:
    out = (r.stderr if r.stderr_bytes is not None else "") + r.stdout
    assert "Traceback" not in out, out
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, out
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    t0 = time.monotonic()
    r = CliRunner().invoke(main, args, env=env)
    r.elapsed_s = time.monotonic() - t0
    return r


@pytest.mark.parametrize(("text"), [t for _, t in BAD_SCENARIOS], ids=[i for i, _ in BAD_SCENARIOS])
def test_bad_scenario_documents(tmp_path: Path, text: str | bytes) -> None:
    path = tmp_path / "s.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    for cmd in (["validate"], ["run", "--out", str(tmp_path / "r")]):
        r = _invoke([*cmd, str(path)])
        _one_line(r)
        assert r.elapsed_s < 30
    assert not (tmp_path / "r").exists()


# (id, extra `run` arguments, the needle in the line, exit code)
BAD_RUN_ARGS: list[tuple[str, list[str], str, int]] = [
    ("port-too-big", ["--endpoint", "http://127.0.0.1:99999"], "port", 2),
    ("port-zero", ["--endpoint", "http://127.0.0.1:0"], "port", 2),
    ("port-text", ["--endpoint", "http://127.0.0.1:http"], "--endpoint", 2),
    ("userinfo", ["--endpoint", "http://user:s3cret@127.0.0.1:9/"], "credentials", 2),
    ("space", ["--endpoint", "http://exa mple.com/"], "spaces", 2),
    ("bad-ipv6", ["--endpoint", "http://[::1/"], "--endpoint", 2),
    ("empty-url", ["--endpoint", ""], "--endpoint", 2),
    ("ftp", ["--endpoint", "ftp://host/x"], "--endpoint", 2),
    ("no-host", ["--endpoint", "http:///v1"], "--endpoint", 2),
    ("unresolvable", ["--endpoint", "http://no-such-host.invalid:9/"], "unreachable", 1),
    ("closed-port", ["--endpoint", "http://127.0.0.1:9/"], "unreachable", 1),
    ("price-nan", ["--price-per-hour", "nan"], "--price-per-hour", 2),
    ("price-inf", ["--price-per-hour", "inf"], "--price-per-hour", 2),
    ("price-negative", ["--price-per-hour", "-5"], "--price-per-hour", 2),
    ("grace-nan", ["--stop-grace-s", "nan"], "--stop-grace-s", 2),
    ("key-file-missing", ["--endpoint", "http://127.0.0.1:9/", "--api-key-file", "/nonexistent"],
     "--api-key-file", 2),
    ("twin-shape", ["--twin", "a/b/c"], "--twin", 2),
    ("twin-unknown", ["--twin", "z9000/qwen3-coder-30b-a3b-awq"], "z9000", 2),
    ("spec-bad", ["--spec", "ngram:abc"], "ngram", 2),
    ("turns-zero", ["--turns", "0"], "turns", 2),
    ("set-alias-bomb", ["--set", "name=" + BOMB.replace("\n", " ").replace(": ", ":")], "", 2),
    ("set-bool", ["--set", "turns=true"], "turns", 2),
    ("set-no-equals", ["--set", "turns"], "--set", 2),
    ("set-index", ["--set", "turn_templates.99.weight=1"], "turn_templates", 2),
    ("set-deep", ["--set", "turns=" + "[" * 3000 + "]" * 3000], "", 2),
    ("workers-no-endpoint", ["--workers", "2"], "--workers", 2),
    ("resume-missing", ["--resume", "/nonexistent/run"], "", 2),
]


@pytest.mark.parametrize(("args", "needle", "code"), [c[1:] for c in BAD_RUN_ARGS],
                         ids=[c[0] for c in BAD_RUN_ARGS])
def test_bad_run_arguments(tmp_path: Path, args: list[str], needle: str, code: int) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(OK_YAML)
    scenario = [] if "--resume" in args else [str(path)]
    r = _invoke(["run", *scenario, "--quiet", "--out", str(tmp_path / "r"), *args])
    line = _one_line(r, code)
    assert needle in line
    assert "s3cret" not in r.output
    assert r.elapsed_s < 30
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.parametrize("where", ["proc", "file", "too-long", "under-a-file"])
def test_an_out_that_cannot_hold_results(tmp_path: Path, where: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(OK_YAML)
    (tmp_path / "f").write_text("x")
    out = {"proc": "/proc/endurance-results", "file": str(tmp_path / "f"),
           "too-long": str(tmp_path / ("d" * 300)), "under-a-file": str(tmp_path / "f" / "sub")}[where]
    line = _one_line(_invoke(["run", str(path), "--quiet", "--out", out]))
    assert "--out" in line


BAD_CHECK_ARGS: list[tuple[str, list[str], str]] = [
    ("userinfo", ["http://user:s3cret@127.0.0.1:9"], "credentials"),
    ("port", ["http://127.0.0.1:99999"], "port"),
    ("not-url", ["not-a-url"], "expected http(s)://host"),
    ("timeout-nan", ["http://127.0.0.1:9", "--timeout", "nan"], "--timeout"),
    ("timeout-neg", ["http://127.0.0.1:9", "--timeout", "-1"], "--timeout"),
    ("key-file", ["http://127.0.0.1:9", "--api-key-file", "/nonexistent"], "--api-key-file"),
]


@pytest.mark.parametrize(("args", "needle"), [c[1:] for c in BAD_CHECK_ARGS],
                         ids=[c[0] for c in BAD_CHECK_ARGS])
def test_bad_check_arguments(args: list[str], needle: str) -> None:
    r = _invoke(["check", *args])
    assert needle in _one_line(r)
    assert "s3cret" not in r.output


BAD_TWIN_ARGS: list[tuple[str, list[str], str]] = [
    ("time-scale-nan", ["--time-scale", "nan"], "--time-scale"),
    ("time-scale-zero", ["--time-scale", "0"], "--time-scale"),
    ("cutoff-inf", ["--cutoff-s", "inf"], "--cutoff-s"),
    ("faults-over-1", ["--faults", "429:2"], "--faults"),
    ("faults-kind", ["--faults", "teapot:0.1"], "--faults"),
    ("faults-nan", ["--faults", "429:nan"], "--faults"),
    ("faults-stall-inf", ["--faults", "stall:0.1:inf"], "--faults"),
    ("bad-host", ["--host", "no-such-host.invalid", "--port", "0"], "--host"),
    ("spec", ["--spec", "ngram:-3"], "ngram"),
    ("hardware", ["--hardware", "z9000"], "z9000"),
]


@pytest.mark.parametrize(("args", "needle"), [c[1:] for c in BAD_TWIN_ARGS],
                         ids=[c[0] for c in BAD_TWIN_ARGS])
def test_bad_twin_serve_arguments(args: list[str], needle: str) -> None:
    assert needle in _one_line(_invoke(["twin", "serve", *args]))


def test_twin_serve_on_a_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = _one_line(_invoke(["twin", "serve", "--port", str(port)]))
    assert str(port) in line


def test_report_on_a_corrupted_manifest(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{torn")
    _one_line(_invoke(["report", str(tmp_path)]))


def test_redaction_masks_keys_everywhere() -> None:
    url = "https://bob:hunter2@api.example.com:8443/v1?api_key=K1&model=m&access_token=T2"
    got = redact_url(url)
    assert "hunter2" not in got and "K1" not in got and "T2" not in got
    assert "api.example.com:8443/v1" in got and "model=m" in got
    assert "hunter2" not in redact_text(f"connect to {url} failed")
    doc = redact({"endpoint": {"base_url": url, "headers": {"x-api-key": "K3",
                                                            "Authorization": "Bearer K4"}},
                  "api_key_env": "ANTHROPIC_API_KEY", "max_tokens": 5})
    blob = json.dumps(doc)
    assert not any(s in blob for s in ("hunter2", "K1", "K3", "K4"))
    assert doc["api_key_env"] == "ANTHROPIC_API_KEY" and doc["max_tokens"] == 5
    assert redact_url("http://h:99999999/x?token=1") .endswith("token=***")


# ------------------------------------------------------------------ generated documents
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
_keys = st.sampled_from(["name", "turns", "sessions", "seed", "max_tokens", "think_time_s",
                         "first_prompt_tokens", "retry", "limits", "arrival", "compaction",
                         "turn_templates", "system", "tools", "deadline_s", "x"])
_value = st.recursive(_scalar, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=10), kids, max_size=4)),
    max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_keys, _value, max_size=6))
def test_generated_scenario_documents_are_accepted_or_refused_in_one_line(
        tmp_path: Path, doc: dict[str, Any]) -> None:
    data = {**small_scenario(turns=1), **doc}
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=False))
    r = CliRunner().invoke(main, ["validate", str(path)])
    assert "Traceback" not in r.output and (r.exception is None
                                            or isinstance(r.exception, SystemExit)), r.output
    if r.exit_code != 0:
        _one_line(r)


# ------------------------------------------------------------------ real processes
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigterm_right_after_the_results_dir_appears_is_an_interrupt(tmp_path: Path) -> None:
    """SIGTERM within the first moments of a run: status interrupted, never `running`."""
    import signal
    import subprocess
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(sessions=4, turns=400)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(path), "--quiet",
                             "--out", str(tmp_path / "r")], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    end = time.monotonic() + 60
    while time.monotonic() < end and not list((tmp_path / "r").glob("*/manifest.json")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    manifest = json.loads(next((tmp_path / "r").glob("*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted" and proc.returncode == 130


# ------------------------------------------------------------------ a full disk
def _fill_disk_after(monkeypatch: pytest.MonkeyPatch, rows: int, *, parquet: bool) -> None:
    """Journal writes fail with ENOSPC after `rows` rows (and parquet too if asked)."""
    import errno

    from simulator.records.recorder import Recorder
    real = Recorder.write_row          # every turn row's journal line goes through it
    count = {"n": 0}

    def write_row(self: Recorder, row: Any, line: str | None = None) -> None:
        count["n"] += 1
        if count["n"] > rows:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, row, line)

    monkeypatch.setattr(Recorder, "write_row", write_row)
    if parquet:
        def full(*_a: Any, **_k: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr("pandas.DataFrame.to_parquet", full)


@pytest.mark.parametrize("parquet", [False, True], ids=["journal-full", "parquet-full-too"])
def test_a_full_disk_fails_the_run_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               parquet: bool) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(sessions=3, turns=10)))
    _fill_disk_after(monkeypatch, 7, parquet=parquet)
    r = _invoke(["run", str(path), "--quiet", "--out", str(tmp_path / "r")])
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit | None)
    assert r.exit_code == 1
    run_dir = next((tmp_path / "r").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert "No space left on device" in manifest["status_reason"]
    assert len((run_dir / "turns.jsonl").read_text().splitlines()) == 7   # rows kept
    if parquet:
        assert "No space left" in _one_line(r, 1)
    else:
        assert len(r.stderr.strip().splitlines()) <= 2     # the status line, no flood


def test_an_api_key_file_is_read_and_a_command_line_key_warned_about(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-test-123\n")
    r = _invoke(["check", "http://127.0.0.1:9", "--api-key", "sk-cli", "--timeout", "1"])
    assert "warning: --api-key on the command line" in r.stderr and "sk-cli" not in r.output
    path = tmp_path / "s.yaml"
    path.write_text(OK_YAML)
    r = _invoke(["run", str(path), "--quiet", "--out", str(tmp_path / "r"), "--endpoint",
                 "http://127.0.0.1:9/?api_key=sk-q", "--api-key-file", str(key)])
    assert "unreachable" in _one_line(r, 1) and "sk-q" not in r.output


@pytest.mark.parametrize("client", ["lean", "aiohttp", pytest.param("sdk", marks=pytest.mark.slow)])
def test_no_key_in_the_url_reaches_any_file(tmp_path: Path, client: str) -> None:
    from tests.reliability_twin import TwinThread
    path = tmp_path / "s.yaml"
    path.write_text(OK_YAML)
    with TwinThread() as twin:
        r = _invoke(["run", str(path), "--quiet", "--out", str(tmp_path / "r"), "--client", client,
                     "--endpoint", twin.url + "/?api_key=SECRETQ&token=SECRETT"])
    assert "Traceback" not in r.output and "SECRET" not in r.output
    files = [f for f in (tmp_path / "r").rglob("*") if f.is_file()]
    assert files and not any(b"SECRET" in f.read_bytes() for f in files)


@pytest.mark.parametrize(("system", "tools"), [
    (b"\xff\xfe not utf-8", b"- {name: Read}\n"),
    (b"fine", b"- {name: Read}\n- bad: [\n"),
    (b"fine", BOMB.encode()),
    (b"fine", b"{tools: 5}\n"),
    (b"fine", b"- {name: Read}\n- {name: Read, name: Write}\n"),
], ids=["system-not-utf8", "tools-malformed", "tools-alias-bomb", "tools-not-a-list",
        "tools-duplicate-key"])
def test_bad_referenced_files(tmp_path: Path, system: bytes, tools: bytes) -> None:
    (tmp_path / "sys.md").write_bytes(system)
    (tmp_path / "tools.yaml").write_bytes(tools)
    path = tmp_path / "s.yaml"
    path.write_text(_doc(system={"file": "sys.md"}, tools={"file": "tools.yaml"}))
    for cmd in (["validate"], ["run", "--out", str(tmp_path / "r")]):
        _one_line(_invoke([*cmd, str(path)]))
    assert not (tmp_path / "r").exists()


def test_a_key_with_a_newline_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(OK_YAML)
    env = {"ANTHROPIC_API_KEY": "sk-abc\nInjected: 1"}
    r = _invoke(["run", str(path), "--quiet", "--out", str(tmp_path / "r"), "--endpoint",
                 "http://127.0.0.1:9/"], env=env)
    assert "$ANTHROPIC_API_KEY" in _one_line(r) and "sk-abc" not in r.output
    r = _invoke(["check", "http://127.0.0.1:9"], env=env)
    assert "API key" in _one_line(r) and "sk-abc" not in r.output
