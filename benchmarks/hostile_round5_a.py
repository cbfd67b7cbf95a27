"""Issue 57's hostile cases (round five), part a, run by `benchmarks/hostile_cases.py
--round 5` beside part b (`hostile_round5_b.py`): P/D fleets the in-process twin or one
server cannot hold and P/D options nothing reads (pd), the stop grace counted in wall
time (signals), `size --team` on a fixed P:D unit or a team no search runs (sizing), and
versions and options read wrongly or ignored (options). Same shape as round four
(`hostile_round4.py`): shell commands in a child process group under an address-space
cap, the verdicts of round three plus round four's `script` and `refuse_no_out`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.hostile_round3 import (  # noqa: E402  (after the path)
    SCENARIO,
    Case,
    Tally,
    case_env,
    tally_cases,
)
from benchmarks.hostile_round4 import run_case  # noqa: E402

SLO = "--slo 'ttft_p95_s<=5'"


def make_fixtures(fx: Path, root: Path) -> None:
    import yaml
    fx.mkdir(parents=True, exist_ok=True)
    (fx / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    (fx / "router.yaml").write_text(yaml.safe_dump({**SCENARIO, "fleet": {"router": "kv_cost"}}))
    for v in ("0.3", "0.2"):
        (fx / f"v{v}.yaml").write_text(yaml.safe_dump(SCENARIO) + f"twin:\n  vllm_version: {v}\n")
    # a small imported team day (synthetic OTLP logs, `tests/otel_export.py`)
    from tests.otel_export import team_day, write_json_logs
    src = write_json_logs(fx / "day.jsonl", team_day(seed=5, sessions=3, requests=(2, 3)))
    subprocess.run([sys.executable, "-m", "simulator", "import", "claude-code-otel", str(src),
                    "-o", str(fx / "team.yaml")], check=True, capture_output=True, timeout=120,
                   cwd=root, env={**os.environ, "PYTHONPATH": str(root)})


def cases() -> list[Case]:
    out: list[Case] = []

    def c(name: str, group: str, cmd: str, expect: str = "refuse", **kw: object) -> None:
        out.append(Case(name, group, cmd, expect, **kw))  # type: ignore[arg-type]

    # item 2: P + D counted toward the memory bound; P/D options nothing reads
    c("run-pd-1024-1", "pd", "$E run $F/s.yaml --pd 1024:1 --out $T/o", "refuse_no_out",
      needle="1,024 prefill + 1 decode")
    c("run-pd-with-router", "pd", "$E run $F/s.yaml --pd 1:1 --router kv_cost --out $T/o",
      "refuse_no_out", needle="--router with --pd")
    c("run-pd-router-in-file", "pd", "$E run $F/router.yaml --pd 1:1 --out $T/o",
      "refuse_no_out", needle="fleet.router")
    c("serve-pd-1024-1024", "pd", "$E twin serve --port 0 --pd 1024:1024", needle="64 engines")
    c("serve-kv-link-without-pd", "pd", "$E twin serve --port 0 --kv-link nvlink",
      needle="--kv-link is a P/D setting")
    c("serve-threshold-without-pd", "pd", "$E twin serve --port 0 --max-local-prefill 5",
      needle="--max-local-prefill is a P/D setting")
    c("serve-pd-with-router", "pd", "$E twin serve --port 0 --pd 1:1 --router least_loaded",
      needle="--router with --pd")
    # item 2: the stop grace ends in wall time while virtual time stands still
    c("sigterm-grace-in-wall-time", "signals",
      "$PY -m pytest -q -n 0 -p no:cacheprovider $ROOT/tests/session/test_runner_unit.py "
      "-k stop_grace", "script", bound_s=60.0)
    # item 3: the sizing answers
    c("size-team-fixed-pd-unit", "sizing",
      f"$E size $F/s.yaml {SLO} --team 4 --pd 1:2 --out $T/o", "refuse_no_out",
      needle="--pd alone")
    c("size-team-with-replicas", "sizing",
      f"$E size $F/s.yaml {SLO} --team 4 --replicas 2 --out $T/o", "refuse_no_out",
      needle="size --team with --replicas")
    for name, search in (("pd", "--pd"), ("fleet", "--router least_loaded")):
        c(f"size-team-1e6-{name}", "sizing",
          f"$E size $F/s.yaml {SLO} --team 1000000 {search} --out $T/o", "refuse_no_out",
          needle="--team 1000000")
    # item 6: versions and options read wrongly or ignored
    for v in ("0.3", "0.2"):
        c(f"vllm-version-{v}-yaml", "options", f"$E run $F/v{v}.yaml --out $T/o",
          "refuse_no_out", needle="quote it")
    c("vllm-version-0.3-set", "options",
      "$E run $F/s.yaml --set twin.vllm_version=0.3 --out $T/o", "refuse_no_out",
      needle="quote it")
    for flag, key in (("--duration 1m", "load.duration_s"), ("--warm-start", "load.warm_start"),
                      ("--ramp 1,2", "load.ramp")):
        c(f"team-run-{flag.split()[0][2:]}", "options",
          f"$E run $F/team.yaml {flag} --out $T/o", "refuse_no_out", needle=key)
    for flag, key in (("--duration 1m", "load.duration_s"), ("--warm-start", "load.warm_start")):
        c(f"team-size-{flag.split()[0][2:]}", "options",
          f"$E size $F/team.yaml {SLO} {flag} --out $T/o", "refuse_no_out", needle=key)
    c("twin-show-context-negative", "options", "$E twin show --context -5000000",
      needle="--context")
    c("twin-show-context-past-the-model", "options",
      "$E twin show a40/qwen3-coder-30b-a3b-awq --context 5000000", needle="context length")
    return out


def run_all(root: Path, tmp: Path, only: str = "", group: str = "",
            report: Callable[[str, str, int | None, float, str], None] | None = None) -> Tally:
    fx = tmp / "fixtures"
    make_fixtures(fx, root)
    env = case_env(root, fx, HERE)
    return tally_cases(cases(), run_case, env, tmp, fx, only, group, report)
