"""Issue 57's hostile cases (round five), part b, run by `benchmarks/hostile_cases.py
--round 5` beside part a (`hostile_round5_a.py`): huge numbers and deep nesting in every
file of a run folder and in `--set` (runfiles), an OTLP file of zeros (otel), the SDK
endpoints' fault records with the installed SDK (sdk), and a labelled run's folder name
(label). Same shape as round four (`hostile_round4.py`): shell commands in a child
process group under an address-space cap, the verdicts of round three plus round four's
`script` and `refuse_no_out`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.hostile_round3 import SCENARIO, Case, Tally, tally_cases  # noqa: E402
from benchmarks.hostile_round4 import run_case  # noqa: E402

BIG = "9" * 5000
DEEP_PY = "'['*100000+']'*100000"


def make_fixtures(fx: Path) -> None:
    import yaml
    fx.mkdir(parents=True, exist_ok=True)
    (fx / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    text = yaml.safe_dump(SCENARIO)
    (fx / "big_int.yaml").write_text(text + f"seed: {BIG}\n" if "seed:" not in text
                                     else text.replace("seed: ", f"seed: {BIG} #", 1))


def _poison(name: str, value: str, status: str = "") -> str:
    """A copy of the base run in $T/r with `name`'s JSON object given one hostile member
    (Python expression `value`), and the manifest's status set to `status` if given."""
    st = (f"m=json.load(open('$T/r/manifest.json')); m['status']='{status}'; "
          "json.dump(m, open('$T/r/manifest.json','w')); ") if status else ""
    return (f"cp -r $BASE $T/r && $PY -c \"import json; {st}p='$T/r/{name}'; "
            f"s=open(p).read().rstrip()[:-1]; open(p,'w').write(s+', \\\"h\\\": '+{value}+'}}')\" "
            "&& ")


def cases() -> list[Case]:
    out: list[Case] = []

    def c(name: str, group: str, cmd: str, expect: str = "refuse", **kw: object) -> None:
        out.append(Case(name, group, cmd, expect, **kw))  # type: ignore[arg-type]

    for label, value in (("digits", repr(BIG)), ("deep", DEEP_PY)):
        for f in ("manifest.json", "summary.json"):
            c(f"report-{f}-{label}", "runfiles",
              _poison(f, value) + "$E report $T/r", needle=f)
            c(f"compare-{f}-{label}", "runfiles",
              _poison(f, value) + "$E compare $T/r $BASE", needle=f)
        c(f"resume-manifest-{label}", "runfiles",
          _poison("manifest.json", value, "interrupted") + "$E run --resume $T/r",
          needle="manifest.json")
        c(f"resume-journal-{label}", "runfiles",
          f"cp -r $BASE $T/r && $PY -c \"import json; m=json.load(open('$T/r/manifest.json')); "
          "m['status']='interrupted'; json.dump(m, open('$T/r/manifest.json','w')); "
          f"open('$T/r/turns.jsonl','a').write('{{\\\"h\\\": '+{value}+'}}\\n')\" && "
          "$E run --resume $T/r", needle="turns.jsonl:")
        c(f"report-size-json-{label}", "runfiles",
          f"mkdir $T/z && $PY -c \"open('$T/z/size.json','w').write('{{\\\"kind\\\": "
          f"\\\"team\\\", \\\"h\\\": '+{value}+'}}')\" && $E report $T/z", needle="size.json")
    for key in ("seed", "think_time_s", "twin.x"):
        c(f"set-{key}-5000-digits", "runfiles",
          f"$E run $F/s.yaml --set {key}={BIG} --out $T/o", "refuse_no_out",
          needle=f"--set {key}")
    c("scenario-5000-digits", "runfiles", "$E run $F/big_int.yaml --out $T/o",
      "refuse_no_out", needle="4,300 digits")
    # an OTLP protobuf file that never ends: 1 GB of zeros, each 4 a zero length prefix
    for fmt in ("claude-code-otel", "otel-genai"):
        c(f"otel-sparse-1gb-{fmt}", "otel",
          f"truncate -s 1G $T/sparse.bin && $E import {fmt} $T/sparse.bin -o $T/o.yaml",
          needle="empty messages")
    # the SDK endpoints' records of a reply cut mid-stream and a stall, with the SDK
    # installed here (anthropic 2.17 wraps both in its own errors; 2.16 did not)
    c("sdk-faults-by-the-wire", "sdk",
      "$PY -m pytest -q -n 0 -p no:cacheprovider $ROOT/tests/endpoints/sdk/test_endpoints_sdk.py "
      "\"$ROOT/tests/endpoints/http/test_endpoints_lean.py::test_faults_are_classified_alike\"",
      "script", bound_s=120.0)
    c("run-label-names-the-folder", "label",
      "$E run $F/s.yaml --label block --out $T/o --quiet >/dev/null && "
      "ls $T/o | grep -Eq '^[0-9]{8}-[0-9]{6}-.*-block-[0-9a-f]{4}$'", "script", bound_s=60.0)
    return out


def run_all(root: Path, tmp: Path, only: str = "", group: str = "",
            report: Callable[[str, str, int | None, float, str], None] | None = None) -> Tally:
    fx = tmp / "fixtures"
    make_fixtures(fx)
    env = {**os.environ, "PYTHONPATH": str(root), "E": f"{sys.executable} -m simulator",
           "PY": sys.executable, "F": str(fx), "ROOT": str(root), "HERE": str(HERE),
           "COLUMNS": "200"}
    base = subprocess.run([sys.executable, "-m", "simulator", "run", str(fx / "s.yaml"),
                           "--out", str(tmp / "base"), "--quiet"], capture_output=True,
                          text=True, env=env, timeout=300, cwd=root)
    env["BASE"] = base.stdout.strip().splitlines()[-1]
    return tally_cases(cases(), run_case, env, tmp, fx, only, group, report)
