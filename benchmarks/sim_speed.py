"""Simulation speed: how fast the in-process twin runs the bundled endurance scenario.

For each session count N it runs `scenarios/claude-code-endurance.yaml` on the
in-process twin in virtual time (`simulator.run.execute.execute`, results in a temporary
directory) and prints simulated turns per wall second, simulated seconds per wall
second and the CPU seconds the run took. Turns per session default to the scenario's
553 at N = 1 and to ⌈budget / N⌉ (at most 553) above, so every point finishes in
reasonable time; pass `--turns` to fix them. The 553-turn single-session run is also
timed end to end through the CLI (`python -m simulator run … --quiet`: interpreter
start, imports, tokenizer load and run), which is what the ≤ 10 s target is about.

    python benchmarks/sim_speed.py                       # 1, 8, 32, 128 sessions
    python benchmarks/sim_speed.py --sessions 32 --turns 100 --no-cli
    python benchmarks/sim_speed.py --sessions 128 --no-cli --kv-offload-gib 0 256
                                     # the same points without and with a host KV tier
    python benchmarks/sim_speed.py --fleet --no-cli      # 4 H100 replicas × 256 × 10

`--fleet` times the fleet point of docs/fleet.md: 4 `h100` twin replicas behind a
router (`--router`, default prefix_aware) running 256 sessions × 10 turns (target
≤ 30 s wall on this machine).

`--team` times the team-scale commands of issue 36 end to end, each a fresh
`python -m simulator …` process (interpreter start, imports, tokenizer, run, finalize),
and reports its CPU seconds (user + sys of that process, from `wait4`, so the machine's
other load does not count except through cache and frequency effects), the part of
them spent importing `simulator.cli`, peak RSS and wall time, with the load average
before and after each run. `--before DIR` runs every case on another checkout too
(PYTHONPATH=DIR; e.g. a detached worktree of the commit a change started from), the
two alternated case by case, so the before/after columns share the machine's state;
with `--paired` the two run at the same time, one core each, which is what resolves a
change of a few percent on a VM whose speed drifts by ±25% from minute to minute:

    python benchmarks/sim_speed.py --team --before /work/before --cases team256 fleet4
    python benchmarks/sim_speed.py --team --before /work/before --paired --reps 3
    python benchmarks/sim_speed.py --team --base 2303b86 --paired --cases team256 size
                     # the before side checked out for the run (a temporary worktree)
    python benchmarks/sim_speed.py --team --before /work/base --paired --issue-base
                     # /work/base = 21cb8b4, the issue's base: figures on its scale
    python benchmarks/sim_speed.py --team --profile team256    # where the CPU goes

The cases (`--cases`, default all): `team256` (256 × 10 on the H100, all at once; goal
≤ 5 CPU-s, ≤ 500 MB), `w128` (128 sessions, 10 minutes, warm start), `fleet4` (4
replicas × 256 × 10, prefix_aware; goal ≤ 30 CPU-s), `size` (the H100 `size` search
with two SLOs; goal ≤ 60 CPU-s), `fleet-size` (the same search then `--team 256
--router prefix_aware`, the fleet search; goal ≤ 120 CPU-s); by name only: `day8`
(issue 58's team day, 1,000 sessions × 100 turns on 8 H100 replicas, 100,000 requests;
goal ≤ 120 CPU-s), `day8-tenth` (the same at 10 turns), `hours40` and `hours10k`
(`size --interval 1h` on benchmarks/team_day.py's synthetic day of 40 sessions, 1,139
requests, and of 390 sessions, about 10,000 requests, imported whole; the answer
printed is the whole day's cards and the cards per hour). `--profile CASE` runs one
case with a CPU-time sampler (SIGPROF every 2 ms) and prints its CPU by room of the
package (library and stdlib time charged to the package code that called it), the top
functions and the top lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCENARIO = ROOT / "scenarios" / "claude-code-endurance.yaml"
FULL_TURNS = 553
TARGET_WALL_S = 10.0
FLEET_TARGET_WALL_S = 30.0
FLEET_TWIN = "h100/qwen3-coder-30b-a3b-awq"


from machine import machine  # noqa: E402  (benchmarks/machine.py, beside this script)


def turns_for(sessions: int, budget: int) -> int:
    return FULL_TURNS if sessions == 1 else min(FULL_TURNS, math.ceil(budget / sessions))


def run_point(sessions: int, turns: int, offload_gib: float = 0.0,
              extra: tuple[str, ...] = (), twin: str | None = None) -> dict[str, Any]:
    """One run; wall and CPU seconds of `execute` only (imports are already paid)."""
    import pandas as pd

    from simulator.run.execute import execute
    from simulator.run.spec import RunSpec
    tier = [f"twin.kv_offload_gib={offload_gib:g}"] if offload_gib else []
    with tempfile.TemporaryDirectory() as tmp:
        spec = RunSpec(str(SCENARIO), overrides=[f"sessions={sessions}", f"turns={turns}",
                                                 *tier, *extra],
                       out_dir=Path(tmp), show_progress=False, twin=twin)
        t0, c0 = time.perf_counter(), time.process_time()
        result = execute(spec, echo=lambda _line: None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        df = pd.read_parquet(result.run_dir / "turns.parquet")
    done = int((df["request_kind"] == "turn").sum())
    sim_s = result.outcome.wall_window_s
    return {"sessions": sessions, "turns_per_session": turns, "status": result.status,
            "kv_offload_gib": offload_gib,
            "turns": done, "requests": len(df), "wall_s": wall, "cpu_s": cpu,
            "turns_per_wall_s": done / wall, "sim_s": sim_s, "sim_s_per_wall_s": sim_s / wall,
            "kv_usage_peak": result.summary.get("kv_usage_peak")}


def cli_run() -> dict[str, Any]:
    """The full single-session scenario through the CLI, timed from process start."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "simulator", "run", str(SCENARIO), "--quiet",
               "--out", tmp]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    usage = os.times()
    return {"rc": proc.returncode, "wall_s": wall,
            "child_cpu_s": usage.children_user + usage.children_system}


def startup() -> float:
    """Seconds to import the run library and load the tokenizer (paid once per process)."""
    t0 = time.perf_counter()
    import simulator.run.execute  # noqa: F401
    from simulator.util import tokens
    tokens.encoding()
    return time.perf_counter() - t0


# -- --team: the issue-36 commands end to end, before/after --------------------------------
TEAM_SCENARIO = ["scenarios/claude-code-team.yaml", "--twin", FLEET_TWIN]
_ALL_AT_ONCE = ["--set", "arrival.pattern=all_at_once"]
_SLOS = ["--slo", "per_session_tok_s>=30", "--slo", "ttft_p95_s<=10"]
_HOURS = ["--slo", "ttft_p95_s<=3", "--slo", "decode_tok_s_median>=40", "--interval", "1h",
          "--json"]
# name → (CLI args, CPU-s goal, RSS MB goal)
TEAM_CASES: dict[str, tuple[list[str], float | None, float | None]] = {
    "team256": (["run", *TEAM_SCENARIO, "--sessions", "256", "--turns", "10", *_ALL_AT_ONCE,
                 "--quiet"], 5.0, 500.0),
    "w128": (["run", *TEAM_SCENARIO, "--sessions", "128", "--duration", "10m", "--warm-start",
              "--quiet"], None, None),
    "fleet4": (["run", *TEAM_SCENARIO, "--sessions", "256", "--turns", "10", *_ALL_AT_ONCE,
                "--replicas", "4", "--router", "prefix_aware", "--quiet"], 30.0, None),
    "size": (["size", *TEAM_SCENARIO, "--duration", "10m", "--warm-start", *_SLOS, "--json"],
             60.0, None),
    "fleet-size": (["size", *TEAM_SCENARIO, "--duration", "10m", "--warm-start", *_SLOS,
                    "--team", "256", "--router", "prefix_aware", "--json"], 120.0, None),
    # issue 58's team day: 1,000 sessions × 100 turns on 8 H100 replicas (100,000
    # requests; 745 CPU-s at the issue), and the same fleet at a tenth of the turns
    "day8": (["run", *TEAM_SCENARIO, "--sessions", "1000", "--turns", "100",
              "--replicas", "8", "--quiet"], 120.0, None),
    "day8-tenth": (["run", *TEAM_SCENARIO, "--sessions", "1000", "--turns", "10",
                    "--replicas", "8", "--quiet"], None, None),
    # issue 58's `size --interval 1h` on an imported team day (benchmarks/team_day.py's
    # synthetic day, imported whole): the docs' 40-session day (1,139 requests) and a day
    # of 390 sessions (about 10,000 requests); `{day:N}` is the scenario, made once
    "hours40": (["size", "{day:40}", *_HOURS], None, None),
    "hours10k": (["size", "{day:390}", *_HOURS], None, None),
}
DEFAULT_CASES = ["team256", "w128", "fleet4", "size", "fleet-size"]   # day8*, hours*: by name
DAYS = Path(tempfile.gettempdir()) / "endurance-sim-speed-days"


def case_args(name: str) -> list[str]:
    """The case's command, `{day:N}` replaced by the imported day of N sessions
    (generated and imported once with this checkout, then shared by both sides)."""
    out = []
    for a in TEAM_CASES[name][0]:
        if a.startswith("{day:"):
            n = int(a[5:-1])
            path = DAYS / f"team-day-{n}.yaml"
            if not path.is_file():
                env = _child_env(ROOT, {})
                subprocess.run([sys.executable, "-m", "benchmarks.team_day", "--out",
                                str(DAYS / f"logs-{n}"), "--sessions", str(n)], cwd=ROOT,
                               env=env, check=True, capture_output=True)
                subprocess.run([sys.executable, "-m", "simulator", "import", "claude-code-otel",
                                str(DAYS / f"logs-{n}"), "-o", str(path), "--force"], cwd=ROOT,
                               env=env, check=True, capture_output=True)
            a = str(path)
        out.append(a)
    return out

# The child: time the CLI's imports apart from the rest, optionally sampled (--profile).
CHILD = r"""
import atexit, json, os, sys, time
t0 = time.process_time()
from simulator.cli import main
imported = time.process_time() - t0
out = os.environ["SIM_SPEED_OUT"]
atexit.register(lambda: open(out, "w").write(json.dumps({"import_cpu_s": imported})))
sys.argv = ["endurance", *sys.argv[1:]]
prof_path = os.environ.get("SIM_SPEED_PROFILE")
if prof_path:
    # a CPU-time sampler (SIGPROF every 2 ms of CPU): each sample names the innermost
    # Python frame (a C call such as tiktoken's is charged to the line that made it)
    # and the innermost frame of the package outside util/ (its room)
    import collections, signal
    samples = collections.Counter()
    def on_prof(signum, frame):
        inner, own = frame.f_code, None
        f = frame
        while f is not None:
            name = f.f_code.co_filename
            if "/simulator/" in name and "/simulator/util/" not in name:
                own = (name, f.f_code.co_name, f.f_lineno)
                break
            f = f.f_back
        samples[(inner.co_filename, inner.co_name, *(own or ("", "", 0)))] += 1
    signal.signal(signal.SIGPROF, on_prof)
    signal.setitimer(signal.ITIMER_PROF, 0.002, 0.002)
    try:
        main()
    except SystemExit:
        pass
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        with open(prof_path, "w") as fh:
            json.dump([[*k, v] for k, v in samples.items()], fh)
else:
    main()
"""


def _child_env(checkout: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    env.update(extra)
    return env


def compile_checkout(checkout: Path) -> None:
    """Bytecode for the checkout, so no case pays for compiling the package."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "simulator")],
                   env=_child_env(checkout, {}), check=False, capture_output=True)


def team_run(checkout: Path, args: list[str], profile: Path | None = None) -> dict[str, Any]:
    """One CLI command in a fresh interpreter on `checkout`: its own CPU (wait4 rusage),
    peak RSS, wall, import CPU, the load average around it and its last stdout line."""
    return team_runs([checkout], args, profile)[0]


def team_runs(checkouts: list[Path], args: list[str],
              profile: Path | None = None) -> list[dict[str, Any]]:
    """`team_run` of the same command on each checkout, all at the same time (a pair
    on a 2-core machine: each side one core, both under the machine's same moment)."""
    with tempfile.TemporaryDirectory(prefix="sim-speed-") as tmpdir:
        tmps = [Path(tmpdir) / str(i) for i in range(len(checkouts))]
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        procs = []
        for checkout, tmp in zip(checkouts, tmps, strict=True):
            tmp.mkdir()
            extra = {"SIM_SPEED_OUT": str(tmp / "child.json")}
            if profile is not None:
                extra["SIM_SPEED_PROFILE"] = str(profile)
            with (tmp / "stdout").open("w") as fo, (tmp / "stderr").open("w") as fe:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", CHILD, *args, "--out", str(tmp)], cwd=checkout,
                    env=_child_env(checkout, extra), stdout=fo, stderr=fe, text=True))
        done: dict[int, tuple[int, Any, float]] = {}
        while len(done) < len(procs):       # each child's own rusage, as it ends
            pid, status, usage = os.wait4(-1, 0)
            if any(pr.pid == pid for pr in procs):
                done[pid] = (status, usage, time.perf_counter() - t0)
        load1 = os.getloadavg()[0]
        return [_team_result(pr, tmp, *done[pr.pid], (load0, load1))
                for pr, tmp in zip(procs, tmps, strict=True)]


def _team_result(proc: subprocess.Popen[str], tmp: Path, status: int, usage: Any,
                 wall: float, load: tuple[float, float]) -> dict[str, Any]:
    """What `team_run` reports of one finished child (its files in `tmp`)."""
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = (tmp / "stdout").read_text(), (tmp / "stderr").read_text()
    side = tmp / "child.json"
    child = json.loads(side.read_text()) if side.exists() else {}
    last = out.strip().splitlines()[-1] if out.strip() else err.strip()[-300:]
    # a run prints its directory last; `size --json` prints the answer (not a path)
    summary = Path(last) / "summary.json" if len(last) < 4096 and "\n" not in last \
        and not last.startswith("{") else None
    figures = json.loads(summary.read_text()) \
        if summary is not None and summary.is_file() else {}
    return {"rc": proc.returncode, "cpu_s": usage.ru_utime + usage.ru_stime,
            "import_cpu_s": child.get("import_cpu_s"), "rss_mb": usage.ru_maxrss / 1024,
            "wall_s": wall, "load": load, "last": last, "summary": figures}


def _answer(r: dict[str, Any]) -> str:
    """What the command concluded, to check before and after agree (size: the answer)."""
    s = r["summary"]
    if s:
        agg = s.get("aggregate_tok_s")
        return (f"{s.get('ok_turns')} turns, {agg:,.0f} tok/s" if agg is not None
                else f"{s.get('ok_turns')} turns")
    try:
        data = json.loads(r["last"])
    except ValueError:
        return "" if r["rc"] == 0 else f"rc {r['rc']}: {r['last'][-120:]}"
    if isinstance(data, dict):
        parts = [f"{k}={data[k]}" for k in ("sessions", "answer", "cards", "replicas")
                 if k in data and not isinstance(data[k], dict | list)]
        if isinstance(data.get("probes"), list):
            parts.append(f"({len(data['probes'])} probes)")
        hours = data.get("hours")
        if isinstance(hours, dict) and isinstance(hours.get("intervals"), list):
            parts.append("hours=" + ",".join(str(h.get("cards")) for h in hours["intervals"]))
        fleet = data.get("fleet")
        if isinstance(fleet, dict):
            parts += [f"fleet.{k}={fleet[k]}" for k in ("replicas", "answer") if k in fleet]
            if isinstance(fleet.get("probes"), list):
                parts.append(f"({len(fleet['probes'])} fleet probes)")
        return " ".join(parts)
    return ""


# The figures issue 36 measured on its machine, CPU-s, for the commit it measured them on
# (21cb8b4; docs/benchmarks.md): what `--issue-base` scales this machine's figures to
ISSUE_BASE_CPU_S: dict[str, float] = {"team256": 17.1, "size": 160.0}


def issue_scale_lines(cpu: dict[str, dict[str, list[float]]],
                      base_is_issue: bool) -> list[str]:
    """Per case: the sides' mean CPU-s and after/before. With the before side the
    issue's base, also this machine's speed against the issue's (the geometric mean
    of before / the issue's figure over the cases it measured) and each after figure
    on the issue's scale against its goal: a VM whose speed drifts by ±40% from hour to
    hour is judged by what ran beside the base, not by its raw seconds."""
    lines = [f"{'case':<11} {'before':>7} {'after':>7} {'after/before':>12}"
             + ("  on the issue's scale" if base_is_issue else "")]
    means = {name: {side: sum(v) / len(v) for side, v in sides.items() if v}
             for name, sides in cpu.items()}
    failed = {name: [side for side, v in sides.items() if not v] for name, sides in cpu.items()}
    ratios = [means[n]["before"] / ISSUE_BASE_CPU_S[n] for n in ISSUE_BASE_CPU_S
              if "before" in means.get(n, {})]
    speed = math.prod(ratios) ** (1 / len(ratios)) if ratios else None
    for name, m in means.items():
        if "before" not in m or "after" not in m:
            lines.append(f"{name:<11} no ratio: every {' and '.join(failed[name])} run failed"
                         if failed[name] else f"{name:<11} no ratio: one side did not run")
            continue
        line = f"{name:<11} {m['before']:>7.1f} {m['after']:>7.1f} {m['after'] / m['before']:>12.2f}"
        if base_is_issue and speed is not None:
            goal = TEAM_CASES[name][1]
            scaled = m["after"] / speed
            verdict = "" if goal is None else \
                f" (goal ≤ {goal:g}: {'met' if scaled <= goal else 'not met'})"
            line += f"  {scaled:.1f} CPU-s{verdict}"
        lines.append(line)
    if base_is_issue:
        lines.append("this machine against the issue's: " + (
            f"{speed:.2f}× its CPU-s (before / the issue's figure, geometric mean over "
            f"{', '.join(n for n in ISSUE_BASE_CPU_S if 'before' in means.get(n, {}))})"
            if speed is not None else
            f"unknown (run {' or '.join(ISSUE_BASE_CPU_S)} to scale by)"))
    return lines


def counted_cpu(runs: list[tuple[str, dict[str, Any]]]) -> dict[str, list[float]]:
    """Each side's CPU-s over its runs that succeeded (rc 0): a failed command stopped
    early, so its seconds are no figure (a side whose runs all failed keeps an empty
    list, which `issue_scale_lines` reports)."""
    cpu: dict[str, list[float]] = {}
    for side, r in runs:
        cpu.setdefault(side, [])
        if r["rc"] == 0:
            cpu[side].append(r["cpu_s"])
    return cpu


def team_table(cases: list[str], after: Path, before: Path | None,
               paired: bool = False, reps: int = 1, base_is_issue: bool = False) -> None:
    sides = [("before", before), ("after", after)] if before is not None else [("after", after)]
    cpu: dict[str, dict[str, list[float]]] = {}
    for _, checkout in sides:
        assert checkout is not None
        compile_checkout(checkout)
    print(f"{'case':<11} {'side':<7} {'CPU s':>7} {'(imports)':>9} {'RSS MB':>7} "
          f"{'wall s':>7} {'load':>10}  {'goal':<18} result", flush=True)
    for name in cases:
        _, cpu_goal, rss_goal = TEAM_CASES[name]
        args = case_args(name)
        goal = " ".join(x for x in (f"≤ {cpu_goal:g} CPU-s" if cpu_goal else "",
                                    f"≤ {rss_goal:g} MB" if rss_goal else "") if x)
        runs: list[tuple[str, dict[str, Any]]] = []
        for _ in range(reps):
            if paired:
                runs += zip([side for side, _ in sides],
                            team_runs([c for _, c in sides if c is not None], args),
                            strict=True)
            else:
                runs += [(side, team_run(checkout, args)) for side, checkout in sides
                         if checkout is not None]
        for side, r in runs:
            imp = r["import_cpu_s"]
            print(f"{name:<11} {side:<7} {r['cpu_s']:>7.1f} "
                  f"{(f'({imp:.2f})' if imp is not None else '-'):>9} {r['rss_mb']:>7.0f} "
                  f"{r['wall_s']:>7.1f} {r['load'][0]:>4.1f}→{r['load'][1]:<4.1f}  "
                  f"{goal:<18} {_answer(r)}", flush=True)
        cpu[name] = counted_cpu(runs)
    if before is not None:
        print()
        for line in issue_scale_lines(cpu, base_is_issue):
            print(line)


# bucket of a simulator file by its room; anything else is charged to its caller
_ROOMS: tuple[tuple[str, str | None], ...] = (("simulator/twin/core/", "engine + KV (twin/core)"),
          ("simulator/twin/fleet/", "fleet router (twin/fleet)"),
          ("simulator/endpoints/inprocess/", "in-process endpoint (driver, fleet)"),
          ("simulator/twin/serve/textgen", "twin reply text (textgen)"),
          ("simulator/twin/serve/prompt", "prompt tokenisation (twin/serve/prompt)"),
          ("simulator/endpoints/client_meter", "prompt tokenisation (twin/serve/prompt)"),
          ("simulator/twin/serve/", "twin reply planning (reply, recall_reply)"),
          ("simulator/twin/spec_decode/", "n-gram meter (spec_decode)"),
          ("simulator/twin/model/", "perf model + profiles (twin/model)"),
          ("simulator/scenario/content", "user/tool text (scenario/content)"),
          ("simulator/records/prefix", "reuse tracker (records/prefix)"),
          ("simulator/records/", "recorder (records)"),
          ("simulator/session/", "agent + runner (session)"),
          ("simulator/protocol/", "messages (protocol)"),
          ("simulator/clock/", "event loop (clock, asyncio)"),
          ("/asyncio/", "event loop (clock, asyncio)"),
          ("simulator/analysis/", "summary + analysis (finalize)"),
          ("simulator/util/", None),          # token helpers: charged to their callers
          ("simulator/", "other simulator code"))


def _room(filename: str) -> str | None:
    for marker, room in _ROOMS:
        if marker in filename:
            return room
    return None


def profile_buckets(samples_path: Path, top: int = 15) -> None:
    """CPU by room from the child's samples: each sample is charged to the innermost
    frame of the package (outside util/), so tiktoken, random, hashlib, pandas and the
    interpreter's own work count where the package called them."""
    rows = json.loads(samples_path.read_text())
    total = sum(r[-1] for r in rows) or 1
    rooms: defaultdict[str, int] = defaultdict(int)
    inner: defaultdict[str, int] = defaultdict(int)
    own: defaultdict[str, int] = defaultdict(int)
    for ifile, ifunc, sfile, sfunc, sline, n in rows:
        if sfunc == "<module>" or (not sfile and "importlib" in ifile):
            room = "imports"
        else:
            room = (_room(sfile) or "other simulator code") if sfile else "outside the package"
        rooms[room] += n
        inner[f"{ifunc} ({Path(ifile).name})"] += n
        if sfile:
            own[f"{sfunc} ({Path(sfile).parent.name}/{Path(sfile).name}:{sline})"] += n
    print(f"profile: {total} CPU samples of 2 ms")
    for room, n in sorted(rooms.items(), key=lambda kv: -kv[1]):
        print(f"  {100 * n / total:5.1f}%  {room}")
    print("innermost Python function (a C call counts in its caller):")
    for name, n in sorted(inner.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / total:5.1f}%  {name}")
    print("package lines (innermost frame of the package):")
    for name, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / total:5.1f}%  {name}")


def team_profile(case: str, checkout: Path, keep: Path | None = None) -> None:
    compile_checkout(checkout)
    with tempfile.TemporaryDirectory(prefix="sim-speed-prof-") as tmp:
        path = Path(tmp) / "samples.json"
        r = team_run(checkout, case_args(case), profile=path)
        print(f"{case}: {r['cpu_s']:.1f} CPU s sampled, rc {r['rc']}")
        profile_buckets(path)
        if keep is not None:
            keep.write_text(path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--turns", type=int, help="turns per session at every point")
    ap.add_argument("--budget", type=int, default=2048,
                    help="total turns per point above 1 session (default 2048)")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI run")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per point")
    ap.add_argument("--kv-offload-gib", type=float, nargs="+", default=[0.0],
                    help="host KV tier sizes to time each point at (0: off)")
    ap.add_argument("--fleet", action="store_true",
                    help=f"only the fleet point: 4 {FLEET_TWIN} replicas × 256 sessions × 10 turns")
    ap.add_argument("--router", default="prefix_aware", help="the fleet point's router")
    ap.add_argument("--team", action="store_true",
                    help="the team-scale commands of issue 36, end to end (see above)")
    ap.add_argument("--cases", nargs="+", choices=list(TEAM_CASES), default=DEFAULT_CASES,
                    help="--team: which commands (default: all but day8, day8-tenth)")
    ap.add_argument("--before", type=Path, help="--team: also run every case on this checkout")
    ap.add_argument("--base", metavar="COMMIT",
                    help="--team: the before side is COMMIT, checked out for this run in a "
                         "temporary git worktree (removed at the end)")
    ap.add_argument("--paired", action="store_true",
                    help="--team --before: run the two sides at the same time (one core each)")
    ap.add_argument("--reps", type=int, default=1, help="--team: runs of each case per side")
    ap.add_argument("--issue-base", action="store_true",
                    help="--team --before: the before checkout is issue 36's base "
                         "(21cb8b4): also print each figure on the issue's scale")
    ap.add_argument("--profile", choices=list(TEAM_CASES),
                    help="--team: one case with a CPU sampler, CPU by room")
    ap.add_argument("--samples-out", type=Path, help="--profile: keep the raw samples (JSON)")
    args = ap.parse_args()
    if args.base is not None:
        if args.before is not None:
            ap.error("give --before or --base, not both")
        with base_worktree(args.base) as path:
            args.before = path
            run_main(ap, args)
        return
    run_main(ap, args)


@contextlib.contextmanager
def base_worktree(commit: str) -> Iterator[Path]:
    """A detached worktree of `commit` (the previous main) in a temporary folder,
    removed when done: the before side of a side-by-side run."""
    tmp = Path(tempfile.mkdtemp(prefix="sim-speed-base-"))
    path = tmp / "base"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
                   check=True, capture_output=True)
    try:
        print(f"before side: {commit} in {path}", flush=True)
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                       check=False, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def run_main(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.issue_base and args.before is None:
        ap.error("--issue-base needs --before (a checkout of 21cb8b4)")
    if args.before is not None and not (args.before / "simulator").is_dir():
        ap.error(f"--before {args.before}: no checkout of this repository (no simulator/ in it)")
    print(f"machine: {machine()}")
    if args.team or args.profile:
        if args.profile:
            team_profile(args.profile, ROOT, args.samples_out)
        else:
            team_table(args.cases, ROOT, args.before, args.paired, args.reps,
                       args.issue_base)
        return
    print(f"startup (imports + tokenizer load): {startup():.2f} s")
    if args.fleet:
        for replicas in (1, 4):
            p = run_point(256, 10, extra=(f"fleet.replicas={replicas}",
                                          f"fleet.router={args.router}"), twin=FLEET_TWIN)
            verdict = "ok" if p["wall_s"] <= FLEET_TARGET_WALL_S else "over"
            print(f"{replicas} × {FLEET_TWIN} ({args.router}), 256 sessions × 10 turns: "
                  f"{p['wall_s']:.2f} s wall, {p['cpu_s']:.2f} s CPU, {p['turns']} turns, "
                  f"{p['sim_s']:.0f} sim s, {p['status']}"
                  + (f" (target ≤ {FLEET_TARGET_WALL_S:.0f} s: {verdict})" if replicas > 1 else ""),
                  flush=True)
            if args.json:
                print(json.dumps(p))
        return
    if not args.no_cli:
        cli = cli_run()
        verdict = "ok" if cli["wall_s"] <= TARGET_WALL_S else "over"
        print(f"CLI end to end, 1 session × {FULL_TURNS} turns: {cli['wall_s']:.2f} s wall, "
              f"{cli['child_cpu_s']:.2f} s CPU (rc {cli['rc']}; target ≤ {TARGET_WALL_S:.0f} s "
              f"wall: {verdict})")
    print(f"{'sessions':>8} {'tier GiB':>8} {'turns/s':>8} {'turns':>7} {'wall s':>8} "
          f"{'CPU s':>7} {'sim s':>9} {'sim s/wall s':>12} {'KV peak':>8}  status")
    for n, gib in [(n, g) for n in args.sessions for g in args.kv_offload_gib]:
        p = run_point(n, args.turns or turns_for(n, args.budget), gib)
        peak = p["kv_usage_peak"]
        print(f"{n:>8} {gib:>8g} {p['turns_per_wall_s']:>8.1f} {p['turns']:>7} "
              f"{p['wall_s']:>8.2f} {p['cpu_s']:>7.2f} {p['sim_s']:>9.0f} "
              f"{p['sim_s_per_wall_s']:>12.0f} "
              f"{(f'{peak:.1%}' if peak is not None else '-'):>8}  {p['status']} "
              f"({p['turns_per_session']} turns/session)", flush=True)
        if args.json:
            print(json.dumps(p))


if __name__ == "__main__":
    main()
