"""Issue 49's hostile cases (round four), run by `benchmarks/hostile_cases.py --round 4`:
answers that must stay true when a ramp is cut short (Ctrl-C, resume, `--duration`,
goodput's thresholds, options a ramp makes meaningless), `watch` on what a killed or
hostile run leaves, numbers past any bound in `--ramp` and NaN options, `--metrics-port`
typos, a hold no request fits in, `--set` errors through a union's branches, output to
/dev/full and Ctrl-C while the CLI imports; then `hostile_round4_lies.py`'s groups:
`--scrape` targets that lie (telemetry), `twin fit` with hostile spec_replay points and
binary profiles (fits), `--from-twin` as typed (from-twin).

Each case is a shell command in a child process group under an address-space cap, as
round three runs them (`hostile_round3.py`: the environment names E, PY, F, T, BASE,
ROOT, HERE; the verdicts clean, traceback, hang, nonsense, other, slow); two verdicts
are added: `refuse_no_out` (refused, and no results folder `$T/o` was made) and
`stderr1` (one `error:` line on stderr with exit 1, standard output gone); a script
case that ends non-zero (its own checks failed) is `other`, not a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import hostile_round4_lies as lies  # noqa: E402
from benchmarks.hostile_round3 import (  # noqa: E402  (after the path)
    CAP,
    HANG_S,
    SCENARIO,
    Case,
    Tally,
    base_run,
    case_env,
    load_factor,
    tally_cases,
)
from benchmarks.hostile_round3 import verdict as verdict3  # noqa: E402

TEAM = "$ROOT/scenarios/claude-code-team.yaml"
RUN = f"$E run {TEAM} --out $T/o --quiet"
SIZE = f"$E size {TEAM} --slo 'per_session_tok_s>=20' --out $T/o"
BIG = "9" * 5000
FACTOR = "9" * 400


def make_fixtures(fx: Path) -> None:
    import yaml
    fx.mkdir(parents=True, exist_ok=True)
    (fx / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    ramp = {"steps": [1, 2], "hold_s": 10, "max_step_s": 20,
            "tiers": [{"name": "a", "slos": ["bogus_metric>=1"]}]}
    (fx / "bogus_tier.yaml").write_text(yaml.safe_dump({**SCENARIO, "load": {"ramp": ramp}}))
    (fx / "retention_true.yaml").write_text(yaml.safe_dump(
        {**SCENARIO, "twin": {"prefix_cache_retention_interval": True}}))


def _copy_base(edit: str) -> str:
    """A copy of the finished base run in $T/r, then `edit` (shell) on it."""
    return f"cp -r $BASE $T/r && {edit} && "


def cases() -> list[Case]:
    out: list[Case] = []

    def c(name: str, group: str, cmd: str, expect: str = "refuse", **kw: Any) -> None:
        out.append(Case(name, group, cmd, expect, **kw))

    # ---- answers that are not answers
    c("size-ramp-ctrl-c", "answers", "$PY $HERE/hostile_round4.py ramp-ctrl-c $T", "script",
      bound_s=120.0)
    c("size-search-ctrl-c", "answers", "$PY $HERE/hostile_round4.py search-ctrl-c $T",
      "script", bound_s=120.0)
    c("size-ramp-duration", "answers", f"{SIZE} --ramp 1,2 --duration 5m", "refuse_no_out",
      needle="--duration")
    c("size-ramp-duration-3m", "answers", f"{SIZE} --ramp '' --duration 3m", "refuse_no_out",
      needle="--duration")
    c("run-ramp-set-duration", "answers", f"{RUN} --ramp 1,2 --set load.duration_s=300",
      "refuse_no_out", needle="--duration")
    c("goodput-follows-slos", "answers", "$PY $HERE/hostile_round4.py goodput $T", "script",
      bound_s=120.0)
    c("run-ramp-sessions", "answers", f"{RUN} --ramp 1,2 --sessions 7", "refuse_no_out",
      needle="--sessions")
    c("ramp-1+1..5000", "answers", f"{RUN} --ramp 1+1..5000", "refuse_no_out",
      needle="4096 steps")
    c("run-hold-without-ramp", "answers", f"{RUN} --hold 5m", "refuse_no_out",
      needle="--hold")
    c("size-hold-without-ramp", "answers", f"{SIZE} --hold 5m", "refuse_no_out",
      needle="--hold")
    c("run-max-step-without-ramp", "answers", f"{RUN} --max-step 5m", "refuse_no_out",
      needle="--max-step")
    c("validate-bogus-tier-slo", "answers", "$E validate $F/bogus_tier.yaml",
      needle="bogus_metric")
    # ---- watch
    c("watch-cut-last-line", "watch", _copy_base(
        "head -c -20 $BASE/turns.jsonl > $T/r/turns.jsonl && rm $T/r/summary.json && "
        "sed -i 's/\"status\": \"completed\"/\"status\": \"running\"/' $T/r/manifest.json")
      + "$E watch $T/r --progress plain --speed 0", "ok")
    c("watch-cut-last-line-default-speed", "watch", _copy_base(
        "head -c -20 $BASE/turns.jsonl > $T/r/turns.jsonl && rm $T/r/summary.json")
      + "$E watch $T/r --progress plain", "ok", bound_s=30.0)
    c("watch-fifo-journal", "watch", _copy_base("rm $T/r/turns.jsonl && mkfifo "
                                                "$T/r/turns.jsonl")
      + "$E watch $T/r --speed 0", needle="FIFO")
    c("watch-dev-zero-journal", "watch", _copy_base("ln -sf /dev/zero $T/r/turns.jsonl")
      + "$E watch $T/r --speed 0", needle="device")
    c("watch-self-link-journal", "watch", _copy_base(
        "rm $T/r/turns.jsonl && ln -s turns.jsonl $T/r/turns.jsonl")
      + "$E watch $T/r --speed 0", needle="turns.jsonl")
    c("watch-fifo-metrics", "watch", _copy_base(
        "rm $T/r/server_metrics.jsonl && mkfifo $T/r/server_metrics.jsonl")
      + "$E watch $T/r --speed 0", needle="FIFO")
    c("watch-manifest-not-json", "watch", _copy_base("echo 'not json{' > $T/r/manifest.json")
      + "$E watch $T/r", needle="not a JSON object")
    c("watch-manifest-fifo", "watch", _copy_base(
        "rm $T/r/manifest.json && mkfifo $T/r/manifest.json") + "$E watch $T/r",
      needle="FIFO")
    c("watch-finished-size-folder", "watch", "mkdir $T/size && cp -r $BASE $T/size/ && "
      "echo '{}' > $T/size/size.json && $E watch $T/size --progress plain", "ok")
    c("watch-speed-1e-300", "watch", "$E watch $BASE --speed 1e-300", needle="--speed")
    c("watch-speed-nan", "watch", "$E watch $BASE --speed nan", needle="--speed")
    # ---- numbers
    for form, steps in (("bound", f"1*2..{BIG}"), ("start", f"{BIG}*2..8"),
                        ("factor", f"1*{FACTOR}..8"), ("step", f"1+{FACTOR}..8"),
                        ("plus-bound", f"1+1..{BIG}")):
        c(f"run-ramp-{form}-digits", "numbers", f"{RUN} --ramp {steps}", "refuse_no_out",
          needle="--ramp")
        c(f"size-ramp-{form}-digits", "numbers", f"{SIZE} --ramp {steps}", "refuse_no_out",
          needle="--ramp")
    c("run-ramp-100000-in-process", "numbers", f"{RUN} --ramp '1*2..100000'",
      "refuse_no_out", needle="in-process twin")
    c("attainment-nan", "numbers", f"{SIZE} --tier 30 --attainment nan", "refuse_no_out",
      needle="--attainment")
    c("ttft-nan", "numbers", f"{SIZE} --tier 30 --ttft nan", "refuse_no_out",
      needle="--ttft")
    c("tier-nan", "numbers", f"{SIZE} --tier nan", "refuse_no_out", needle="--tier")
    c("ctrl-c-while-importing", "numbers", "$PY $HERE/hostile_round4.py import-ctrl-c",
      "script", bound_s=60.0)
    # ---- options
    for name, port in (("abc", "abc"), ("empty", "''"), ("minus-1", "-1"),
                       ("70000", "70000"), ("5000-digits", BIG)):
        c(f"metrics-port-{name}", "options", f"{RUN} --turns 1 --metrics-port {port}",
          "refuse_no_out", needle="--metrics-port")
    c("size-hold-0.5ms", "options", f"{SIZE} --ramp 1,2 --hold 0.0005 --max-step 0.001",
      "refuse_no_out", needle="--hold")
    c("set-retention-abc", "options", "$E validate $F/s.yaml --set "
      "twin.prefix_cache_retention_interval=abc", needle="--set")
    c("set-retention-minus-1", "options", "$E validate $F/s.yaml --set "
      "twin.prefix_cache_retention_interval=-1", needle="--set")
    c("set-retention-true", "options", "$E validate $F/s.yaml --set "
      "twin.prefix_cache_retention_interval=true", needle="boolean")
    c("file-retention-true", "options", "$E validate $F/retention_true.yaml",
      needle="boolean")
    c("dev-full-validate", "options", "$E validate $F/s.yaml > /dev/full", "stderr1",
      needle="cannot write")
    c("dev-full-version", "options", "$E --version > /dev/full", "stderr1",
      needle="cannot write")
    c("dev-full-run", "options", "$E run $F/s.yaml --out $T/o > /dev/full", "stderr1",
      needle="cannot write")
    return out + lies.cases()       # telemetry, fits, from-twin


# ---------------------------------------------------------------- verdicts
def verdict(case: Case, rc: int | None, out: str, secs: float, t: Path, fx: Path,
            factor: float = 1.0) -> str:
    if case.expect == "refuse_no_out":
        kind = verdict3(Case(case.name, case.group, case.cmd, "refuse", bound_s=case.bound_s,
                             needle=case.needle), rc, out, secs, t, fx, factor)
        return "other" if kind == "clean" and (t / "o").exists() else kind
    if case.expect in ("telemetry", "refuse2"):
        return lies.verdict(case, rc, out, secs, t, fx, factor)
    if case.expect == "stderr1":
        if rc is None:
            return "hang"
        errors = [x for x in out.splitlines() if x.startswith("error: ")]
        if "Traceback" in out:
            return "traceback"
        good = rc == 1 and len(errors) == 1 and case.needle in errors[0]
        return ("clean" if good else "other") if secs <= case.bound_s * factor or not good \
            else "slow"
    if case.expect == "script":       # its own checks: 0 right, else a wrong outcome
        if rc is None:
            return "hang"
        if "Traceback" in out:
            return "traceback"
        if rc != 0:
            return "other"
        return "clean" if secs <= case.bound_s * factor else "slow"
    return verdict3(case, rc, out, secs, t, fx, factor)


# ---------------------------------------------------------------- scripts
def _endurance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True,
                          text=True, timeout=300, cwd=os.environ.get("ROOT"))


def ramp_ctrl_c(argv: list[str]) -> int:
    """Ctrl-C during `size --ramp` once a step is judged: exit 130, one `interrupted
    after N judged steps` line, no answer line on stdout, size.json labelled
    interrupted; then `run --resume` completes the ramp and rewrites size.json."""
    work = Path(argv[0])
    team = str(HERE.parent / "scenarios" / "claude-code-team.yaml")
    p = subprocess.Popen([sys.executable, "-m", "simulator", "size", team, "--slo",
                          "per_session_tok_s>=20", "--ramp", "1,2,4,8,16", "--hold", "60s",
                          "--no-compare", "--out", str(work / "o")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         cwd=os.environ.get("ROOT"))
    end = time.monotonic() + 90
    while time.monotonic() < end and p.poll() is None and not any(
            '"ramp_step"' in e.read_text(errors="replace")
            for e in work.glob("o/size-*/*/events.jsonl")):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    found = list(work.glob("o/size-*/size.json"))
    data = json.loads(found[0].read_text()) if found else {}
    tiers = (data.get("ramp") or {}).get("tiers") or [{}]
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    first = (p.returncode == 130 and "Traceback" not in err and out.strip() == ""
             and len(errors) == 1 and "interrupted after" in errors[0]
             and data.get("status") == "interrupted"
             and all(t.get("sessions") is None for t in tiers))
    print(f"Ctrl-C: exit {p.returncode}, {errors[-1:]} stdout {out.strip()[-60:]!r}, "
          f"size.json status {data.get('status')}, answer "
          f"{[t.get('sessions') for t in tiers]}")
    runs = [d for d in work.glob("o/size-*/*") if (d / "manifest.json").is_file()]
    if not runs:
        return 3
    r = _endurance("run", "--resume", str(runs[0]), "--quiet")
    again = json.loads(found[0].read_text()) if found else {}
    tiers = (again.get("ramp") or {}).get("tiers") or [{}]
    second = (r.returncode == 0 and again.get("status") == "completed"
              and all(isinstance(t.get("sessions"), int) for t in tiers))
    print(f"resume: exit {r.returncode}, size.json status {again.get('status')}, answer "
          f"{[t.get('sessions') for t in tiers]}")
    return 0 if first and second else 3


def search_ctrl_c(argv: list[str]) -> int:
    """Ctrl-C during the probe search of `size` (after its second probe started): exit
    130, one line saying there is no answer, no size.json, no probe after it."""
    work = Path(argv[0])
    team = str(HERE.parent / "scenarios" / "claude-code-team.yaml")
    p = subprocess.Popen([sys.executable, "-m", "simulator", "size", team, "--slo",
                          "per_session_tok_s>=20", "--duration", "10m", "--warm-start",
                          "--json", "--out", str(work / "o")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         cwd=os.environ.get("ROOT"))
    end = time.monotonic() + 90
    while time.monotonic() < end and p.poll() is None \
            and len(list(work.glob("o/size-*/*/manifest.json"))) < 2:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    runs = len(list(work.glob("o/size-*/*/manifest.json")))
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    answer = list(work.glob("o/size-*/size.json"))
    print(f"exit {p.returncode}, {errors[-1:]}, {runs} probe run(s), size.json "
          f"{'written' if answer else 'none'}, stdout {out.strip()[-60:]!r}")
    ok = (p.returncode == 130 and len(errors) == 1 and "no answer" in errors[0]
          and not answer and out.strip() == "" and runs == 2 and "Traceback" not in err)
    return 0 if ok else 3


def goodput(argv: list[str]) -> int:
    """`size --ramp` judged on per_session_tok_s>=20: goodput counts ≥ 20 tok/s (not
    its default 30), and the table says so."""
    work = Path(argv[0])
    team = str(HERE.parent / "scenarios" / "claude-code-team.yaml")
    r = _endurance("size", team, "--slo", "per_session_tok_s>=20", "--ramp", "1,2",
                   "--hold", "30s", "--no-compare", "--out", str(work / "o"))
    found = list(work.glob("o/size-*/size.json"))
    g = (json.loads(found[0].read_text()).get("ramp") or {}).get("goodput_slo") or {} \
        if found else {}
    shown = "goodput (TTFT ≤ 15 s, ≥ 20 tok/s)" in r.stdout
    print(f"exit {r.returncode}; goodput counted {g}; thresholds in the table: {shown}")
    return 0 if r.returncode in (0, 1) and g.get("output_tok_s") == 20.0 and shown else 3


def import_ctrl_c(_argv: list[str]) -> int:
    """Ctrl-C while the console script imports the CLI (`from simulator.cli import
    main`, as pip's `endurance` script does): exit 130 and one line, never a traceback."""
    worst = 0
    for delay in (0.05, 0.15, 0.3, 0.6):
        p = subprocess.Popen([sys.executable, "-c", "from simulator.cli import main; main()",
                              "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, cwd=os.environ.get("ROOT"))
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
        ok = p.returncode in (0, 130) and "Traceback" not in err
        print(f"SIGINT at {delay} s: exit {p.returncode}, {err.strip().splitlines()[-1:]}")
        worst = max(worst, 0 if ok else 3)
    return worst


SCRIPTS: dict[str, Callable[[list[str]], int]] = {
    "ramp-ctrl-c": ramp_ctrl_c, "goodput": goodput, "import-ctrl-c": import_ctrl_c,
    "search-ctrl-c": search_ctrl_c}


# ---------------------------------------------------------------- running
def _cap() -> None:
    import resource
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_case(case: Case, env: dict[str, str], t: Path, fx: Path
             ) -> tuple[str, int | None, float, str, float]:
    t.mkdir(parents=True)
    factor = load_factor()
    with lies.servers(case.server) as urls:
        t0 = time.monotonic()
        # run in the checkout under test: `python -m` puts the working folder first on
        # the path, before PYTHONPATH
        p = subprocess.Popen(["bash", "-c", case.cmd], env={**env, "T": str(t), **urls},
                             cwd=env["ROOT"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace", preexec_fn=_cap)
        try:
            out, _ = p.communicate(timeout=max(HANG_S, 2 * case.bound_s))
            rc: int | None = p.returncode
        except subprocess.TimeoutExpired:
            rc, out = None, ""
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        secs = time.monotonic() - t0
    return verdict(case, rc, out, secs, t, fx, factor), rc, secs, out, factor


def run_all(root: Path, tmp: Path, only: str = "", group: str = "",
            report: Callable[[str, str, int | None, float, str], None] | None = None) -> Tally:
    fx = tmp / "fixtures"
    make_fixtures(fx)
    lies.make_fixtures(fx)
    env = case_env(root, fx, HERE)
    env["BASE"] = base_run(env, fx, tmp, root)
    return tally_cases(cases(), run_case, env, tmp, fx, only, group, report)


if __name__ == "__main__":
    sys.exit(SCRIPTS[sys.argv[1]](sys.argv[2:]))
