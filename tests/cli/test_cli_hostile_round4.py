"""Issue 49's hostile cases (round four) that end in one line before anything runs:
`--ramp` numbers past any bound, a ramp the in-process twin cannot hold, options a ramp
makes meaningless (`--sessions`, `--duration`, `--hold` without `--ramp`, a hold no
request fits in), a ramp tier SLO on a metric that does not exist, NaN under the option
the user typed, `--metrics-port` typos, `--set` errors through a union's branches, and
output to /dev/full or Ctrl-C while the CLI imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.analysis.ramp import MAX_STEPS, parse_steps
from simulator.cli import main
from simulator.errors import InputError
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml
from tests.size_refusals import NAN, RAMP_MEANINGLESS, RAMP_PAST_BOUND

ROOT = Path(__file__).resolve().parents[2]
BIG = "9" * 5000


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))


def _one_line(args: list[str], *needles: str, code: int = 2) -> str:
    r = CliRunner().invoke(main, args)
    lines = r.output.strip().splitlines()
    assert r.exit_code == code and len(lines) == 1 and lines[0].startswith("error: "), \
        (args[:4], r.output[-2000:])
    assert "Traceback" not in r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert len(lines[0]) < 400, lines[0]
    return lines[0]


@pytest.mark.parametrize("steps", [steps for _, steps in RAMP_PAST_BOUND],
                         ids=[name for name, _ in RAMP_PAST_BOUND])
def test_ramp_numbers_past_any_bound_are_one_line(steps: str, scenario: Path,
                                                  tmp_path: Path) -> None:
    with pytest.raises(InputError, match="100000"):
        parse_steps(steps, 64)
    _one_line(["run", str(scenario), "--ramp", steps, "--out", str(tmp_path / "o")],
              "--ramp")
    _one_line(["size", str(scenario), "--slo", "ttft_p95_s<=5", "--ramp", steps, "--out",
               str(tmp_path / "o")], "--ramp")
    assert not (tmp_path / "o").exists()


def test_a_ramp_of_more_planned_steps_than_it_takes_is_refused_not_cut() -> None:
    with pytest.raises(InputError, match=f"more than {MAX_STEPS} steps"):
        parse_steps("1+1..5000")
    assert parse_steps("1+1..4096")[-1] == 4096


def test_a_ramp_step_the_in_process_twin_cannot_hold_is_refused(scenario: Path,
                                                               tmp_path: Path) -> None:
    _one_line(["run", str(scenario), "--ramp", "1*2..100000", "--out", str(tmp_path / "o")],
              "in-process twin holds at most 10,000")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("cmd", "extra", "needle"), [
    ("run", ["--ramp", "1,2", "--sessions", "7"], "--sessions with --ramp"),
    ("run", ["--ramp", "1,2", "--duration", "5m"], "--duration"),
    ("run", ["--ramp", "1,2", "--set", "load.duration_s=300"], "--duration"),
    ("run", ["--hold", "5m"], "--hold is how long a --ramp"),
    ("run", ["--max-step", "5m"], "--max-step is how long a --ramp"),
    *(("size", list(c.args), c.needles[0]) for c in RAMP_MEANINGLESS),   # --slo given
    ("run", ["--ramp", "1,2", "--hold", "0.0005", "--max-step", "0.001"], "at least 1 s"),
], ids=["run-sessions", "run-duration", "run-set-duration", "run-hold", "run-max-step",
        *(c.id for c in RAMP_MEANINGLESS), "run-hold-0.5ms"])
def test_options_a_ramp_makes_meaningless_are_refused(cmd: str, extra: list[str],
                                                      needle: str, scenario: Path,
                                                      tmp_path: Path) -> None:
    _one_line([cmd, str(scenario), *extra, "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()


def test_validate_refuses_a_ramp_tier_slo_on_a_metric_that_does_not_exist(
        tmp_path: Path) -> None:
    ramp = {"steps": [1, 2], "hold_s": 10, "max_step_s": 20,
            "tiers": [{"name": "a", "slos": ["bogus_metric>=1"]}]}
    path = write_yaml(tmp_path / "s.yaml", {**small_scenario(turns=1), "load": {"ramp": ramp}})
    _one_line(["validate", str(path)], "tier 'a'", "bogus_metric")
    good = {**ramp, "tiers": [{"name": "a", "slos": ["window_ttft_p95_s<=5"]}]}
    ok = write_yaml(tmp_path / "t.yaml", {**small_scenario(turns=1), "load": {"ramp": good}})
    assert CliRunner().invoke(main, ["validate", str(ok)]).exit_code == 0
    # a ramp has its own length: a constant-load duration beside it is refused
    cut = {**small_scenario(turns=1), "load": {"ramp": good, "duration_s": 300}}
    _one_line(["validate", str(write_yaml(tmp_path / "u.yaml", cut))], "duration_s")


@pytest.mark.parametrize(("extra", "option"), [(list(c.args), c.needles[0]) for c in NAN],
                         ids=[c.id for c in NAN])
def test_nan_is_refused_under_the_option_typed(extra: list[str], option: str,
                                               scenario: Path, tmp_path: Path) -> None:
    line = _one_line(["size", str(scenario), *extra, "--out", str(tmp_path / "o")], option)
    assert "--slo" not in line and "--set" not in line


@pytest.mark.parametrize("port", ["abc", "", "-1", "70000", BIG, "h:", "١٢"],
                         ids=["abc", "empty", "negative", "70000", "5000-digits", "no-port",
                              "arabic-digits"])
def test_metrics_port_typos_are_refused_before_the_run_folder_exists(
        port: str, scenario: Path, tmp_path: Path) -> None:
    _one_line(["run", str(scenario), "--metrics-port", port, "--out", str(tmp_path / "o")],
              "--metrics-port")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("value", "needle"), [
    ("abc", "--set twin.prefix_cache_retention_interval"),
    ("-1", "--set twin.prefix_cache_retention_interval"),
    ("true", "boolean"),
])
def test_set_retention_interval_errors_name_set(value: str, needle: str,
                                                scenario: Path) -> None:
    _one_line(["validate", str(scenario), "--set",
               f"twin.prefix_cache_retention_interval={value}"], needle)


def test_a_retention_interval_of_true_in_the_file_fails_validate(tmp_path: Path) -> None:
    data = small_scenario(turns=1)
    data["twin"] = {**data.get("twin", {}), "prefix_cache_retention_interval": True}
    _one_line(["validate", str(write_yaml(tmp_path / "s.yaml", data))], "boolean")
    data["twin"]["prefix_cache_retention_interval"] = "dense"
    assert CliRunner().invoke(main, ["validate", str(write_yaml(tmp_path / "t.yaml",
                                                                data))]).exit_code == 0


def _child(*args: str, stdout: int | None = subprocess.PIPE,
           code: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "simulator", *args]
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", [["--version"], ["--help"], ["validate", "S"]],
                         ids=["version", "help", "validate"])
def test_output_to_dev_full_ends_in_one_line(args: list[str], scenario: Path) -> None:
    with open("/dev/full", "w") as full:
        p = _child(*[str(scenario) if a == "S" else a for a in args], stdout=full.fileno())
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [
        "error: cannot write the output to standard output (No space left on device)"]


def test_ctrl_c_while_the_cli_imports_ends_in_one_line() -> None:
    # the Ctrl-C lands while a command module is imported (as the console script does)
    code = ("import sys\n"
            "class Stop:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'simulator.cli.sweep':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Stop())\n"
            "from simulator.cli import main\n")
    p = _child(code=code)
    assert p.returncode == 130 and p.stderr == "error: interrupted\n", p.stderr[-2000:]
