"""Issue 57's hostile cases (round five), part b, run by `benchmarks/hostile_cases.py
--round 5` beside part a (`hostile_round5_a.py`): huge numbers and deep nesting in every
file of a run folder and in `--set` (runfiles), an OTLP file of zeros, overlapping
requests of one session, the wrong importer and times out of range (otel), records
that say what did not happen (records), the SDK
endpoints' fault records with the installed SDK (sdk), and a labelled run's folder name
(label). Same shape as round four (`hostile_round4.py`): shell commands in a child
process group under an address-space cap, the verdicts of round three plus round four's
`script` and `refuse_no_out`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.hostile_round3 import (  # noqa: E402  (after the path)
    SCENARIO,
    Case,
    Tally,
    base_run,
    case_env,
    tally_cases,
)
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
    _otel_fixtures(fx)
    shipped = HERE.parent / "simulator/twin/model/profiles/models/qwen3-coder-30b-a3b-awq.yaml"
    (fx / "inf_penalty.yaml").write_text(shipped.read_text().replace(
        "repetition_penalty: 1.05", "repetition_penalty: .inf"))


def _otel_event(end_s: float, session: str, dur_ms: int = 60_000,
                ts: str | None = None) -> dict[str, object]:
    from tests.otel_export import _iso, dumps_attrs
    a = {"event.name": "api_request", "event.timestamp": ts or _iso(end_s), "model": "m",
         "duration_ms": dur_ms, "input_tokens": 10, "output_tokens": 100,
         "cache_read_tokens": 18_000, "cache_creation_tokens": 400, "session.id": session,
         "query_source": "agent"}
    return {"timeUnixNano": str(int(end_s * 1e9)),
            "body": {"stringValue": "claude_code.api_request"}, "attributes": dumps_attrs(a)}


def _otel_lines(path: Path, recs: list[dict[str, object]], batch: int = 2000) -> None:
    import json
    with path.open("w") as fh:
        for i in range(0, len(recs), batch):
            fh.write(json.dumps({"resourceLogs": [{"resource": {}, "scopeLogs": [
                {"scope": {}, "logRecords": recs[i:i + batch]}]}]}) + "\n")


def _otel_fixtures(fx: Path) -> None:
    """Issue 57 item 5's OTLP files: 40,000 and 9,000 overlapping requests of one
    session, 100 beside 2 other sessions, a day of each signal, times out of range."""
    from tests.otel_export import DAY0, team_day, write_genai, write_json_logs
    t = DAY0 + 36_000
    _otel_lines(fx / "overlap40k.jsonl", [_otel_event(t + 60 + i * 1e-3, "s")
                                          for i in range(40_000)])
    _otel_lines(fx / "overlap9k.jsonl", [_otel_event(t + 60 + i * 1e-3, "s")
                                         for i in range(9_000)])
    _otel_lines(fx / "par100.jsonl", [_otel_event(t + 60 + i * 1e-3, "s" if i < 100 else f"o{i}")
                                      for i in range(102)])
    day = team_day(0, sessions=3)
    write_json_logs(fx / "events.jsonl", day)
    write_genai(fx / "spans.jsonl", day)
    write_genai(fx / "spans.bin", day, proto=True)
    for name, ts in (("pre1970", "1969-07-20T20:17:00Z"), ("post2262", "2263-01-01T00:00:00Z")):
        _otel_lines(fx / f"{name}.jsonl", [_otel_event(t, "s", ts=ts)])
    _otel_lines(fx / "epoch.jsonl", [_otel_event(0.5, "s", dur_ms=1500)])


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
    # issue 57 item 5: overlapping requests of one session (the lane search was
    # quadratic: 40,000 hung), the true peak, the wrong importer, times out of range
    for n in ("40k", "9k"):
        c(f"otel-overlap-{n}-one-session", "otel",
          f"$E import claude-code-otel $F/overlap{n}.jsonl -o $T/o.yaml",
          needle="in flight at once (at most 256 per session)")
    c("otel-true-peak-of-streams", "otel",
      "$E import claude-code-otel $F/par100.jsonl -o $T/o.yaml | "
      "grep -q 'peak 3 session(s) and 102 stream(s) in flight at once'", "script")
    for f, fmt, cmd in (("spans.jsonl", "claude-code-otel", "otel-genai"),
                        ("spans.bin", "claude-code-otel", "otel-genai"),
                        ("events.jsonl", "otel-genai", "claude-code-otel")):
        c(f"otel-{f}-given-to-{fmt}", "otel", f"$E import {fmt} $F/{f} -o $T/o.yaml",
          needle=f"run `endurance import {cmd}")
    for f, needle in (("pre1970", "before 1970"), ("post2262", "past the year 2262"),
                      ("epoch", "began before 1970")):
        c(f"otel-time-{f}", "otel", f"$E import claude-code-otel $F/{f}.jsonl -o $T/o.yaml",
          needle=needle)
    # issue 57 item 7: records that say what did not happen
    c("pd-manifest-states-sampling", "records",
      "d=$($E run $F/s.yaml --pd 1:1 --out $T/o --quiet | tail -1) && $PY -c \"import json, "
      "sys; m=json.load(open(sys.argv[1]+'/manifest.json')); "
      "sys.exit(m['sampling']['resolved'] is None)\" $d", "script", bound_s=60.0)
    c("profile-repetition-penalty-inf", "records",
      "$E run $F/s.yaml --set twin.model=$F/inf_penalty.yaml --out $T/o", "refuse_no_out",
      needle="generation_config.repetition_penalty")
    interrupted = ("cp -r $BASE $T/r && $PY -c \"import json; p='$T/r/manifest.json'; "
                   "m=json.load(open(p)); m['status']='interrupted'; "
                   "json.dump(m, open(p,'w'))\" && ")
    c("resume-duplicated-rows-kept-once", "records",
      interrupted + "head -2 $T/r/turns.jsonl >> $T/r/turns.jsonl && "
      "$E run --resume $T/r --quiet > $T/out 2>&1; grep -q '2 duplicated row(s)' $T/out && "
      "test $(wc -l < $T/r/turns.jsonl) -eq $(wc -l < $BASE/turns.jsonl)", "script",
      bound_s=60.0)
    c("watch-names-the-row-resume-refuses", "records",
      interrupted + "sed -i '2i garbage' $T/r/turns.jsonl && $E watch $T/r --speed 0",
      needle="turns.jsonl:2: corrupted journal line")
    c("set-sampling-blames-the-set", "records",
      "$E run $F/s.yaml --set sampling.presence_penalty=0.5 --set endpoint.api=anthropic "
      "--out $T/o", "refuse_no_out", needle="--set sampling.presence_penalty")
    c("resume-manifest-twin-blames-the-manifest", "records",
      "cp -r $BASE $T/r && $PY -c \"import json; p='$T/r/manifest.json'; "
      "m=json.load(open(p)); m['status']='interrupted'; m['run_spec']=dict(m.get('run_spec') "
      "or {}, twin='bogus'); json.dump(m, open(p,'w'))\" && $E run --resume $T/r",
      needle="manifest.json: run_spec.twin")
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
    env = case_env(root, fx, HERE)
    env["BASE"] = base_run(env, fx, tmp, root)
    return tally_cases(cases(), run_case, env, tmp, fx, only, group, report)
