"""Issue 38's hostile cases (round three), run by `benchmarks/hostile_cases.py`: the trace
importers and exporters, `twin fit`/`twin points`, the tier, fleet and recall-check
options, `--reset-prefix-cache`, the pre-flight's defaults, resume and Ctrl-C, and the
recall counts — 250 cases reproduced one by one in the triage (notes: issue38-cases.md),
ported here as one table.

Each case is a shell command run with `bash -c` in a child process group, under an
address-space cap, killed at HANG_S; the environment names:

    E     python -m simulator (the checkout under test: PYTHONPATH)
    PY    this Python
    F     the fixtures (`make_fixtures`: small files, a FIFO, private device nodes, and
          the large traces scaled to just past their bounds)
    T     a fresh empty folder of the case
    BASE  a finished 1-session, 2-turn twin run made with record_blocks=true
    URL   the case's server: "GET/POST" modes of `tests.lying_servers`, or "twin"

A verdict: clean (the expected outcome, within the case's bound: 10 s, 20 s for two
commands, a minute for the two that show a default limit — on a busy machine scaled by
its 1-minute load average per core, printed with each case), traceback, hang (killed),
nonsense (accepted what it should refuse, or scored what it should not), other (wrong
exit code, data touched), slow (right, past its bound).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLEAN_S = 10.0          # every case ends within this (interpreter start-up included)
HANG_S = 70.0           # killed here: a hang
CAP = 3 * 2**30         # address space of the case's processes


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    cmd: str
    expect: str = "refuse"      # refuse | ok | fail1 | a check's name (CHECKS)
    server: str | None = None   # "GET/POST" lying modes, or "twin"
    bound_s: float = CLEAN_S
    needle: str = ""            # refuse: the error line names it


# ---------------------------------------------------------------- fixtures
def _req(i: int = 0, **over: Any) -> dict[str, Any]:
    d = {"t": float(i), "type": "s", "model": "m", "in": 2000 + 100 * i, "out": 50,
         "hash_ids": list(range(1, 31 + i)), "api_time": 1.0, "ttft": 0.2, "think_time": 0.5}
    d.update(over)
    return d


def _weka(reqs: list[Any], **head: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": "t", "models": ["m"], "block_size": 64,
                         "hash_id_scope": "local", "tool_tokens": 500, "system_tokens": 300}
    d.update(head)
    d["requests"] = reqs
    return d


def _mrow(i: int = 0, **over: Any) -> dict[str, Any]:
    d = {"timestamp": 1000 * i, "input_length": 2000 + 100 * i, "output_length": 50,
         "hash_ids": list(range(1, 5 + i))}
    d.update(over)
    return d


def _jl(rows: list[Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


POINTS_HEAD = "hardware: a40\nmodel: qwen3-coder-30b-a3b-awq\nfit: [eta_c]\npoints:\n"
SCENARIO = {"name": "h", "sessions": 1, "turns": 2, "seed": 3, "system": {"tokens": 100},
            "tools": {"count": 1, "tokens": 100}, "first_prompt_tokens": 50,
            "user_prompt_tokens": 20, "retry": {"max_attempts": 1},
            "limits": {"max_failed_sessions_frac": 1.0},
            "turn_templates": [{"name": "answer", "weight": 1, "output_tokens": 20}]}


def make_fixtures(fx: Path, root: Path) -> None:
    """Every file a case reads, under `fx` (~300 MB with the scaled large traces)."""
    import yaml
    fx.mkdir(parents=True, exist_ok=True)

    def w(name: str, data: str | bytes) -> None:
        p = fx / name
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data)

    two = [_req(0), _req(1)]
    txt = json.dumps(_weka(two))
    big = "9" * 5000
    deep = "[" * 100_000 + "]" * 100_000
    w("s.yaml", yaml.safe_dump(SCENARIO))
    w("s4.yaml", yaml.safe_dump({**SCENARIO, "turns": 4}))
    w("s_workers.yaml", yaml.safe_dump({**SCENARIO, "sessions": 4, "turns": 400,
                                        "think_time_s": 0.5}))
    w("w_ok.json", txt)
    w("m_ok.jsonl", _jl([_mrow(0), _mrow(1)]))
    w("m_sess_ok.jsonl", _jl([_mrow(0, session_id="a"), {**_mrow(1, session_id="a"),
                                                         "delay": 500}]))
    w("w_bigint_in.json", txt.replace('"in": 2000', f'"in": {big}', 1))
    w("w_bigint_hash.json", txt.replace('"hash_ids": [1,', f'"hash_ids": [{big},', 1))
    w("w_bigint_bs.json", txt.replace('"block_size": 64', f'"block_size": {big}'))
    w("w_bigfloat_t.json", txt.replace('"t": 1.0', '"t": 1' + "0" * 400 + ".0", 1))
    w("m_bigint_in.jsonl", _jl([_mrow(0)]).replace('"input_length": 2000',
                                                   f'"input_length": {big}'))
    w("m_bigint_hash.jsonl", _jl([_mrow(0)]).replace('"hash_ids": [1,', f'"hash_ids": [{big},'))
    w("m_deep.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": '
      + deep + "}\n")
    w("m_deep_obj.jsonl", '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    w("w_deep.json", txt[:-2] + ", " + deep + "]}")
    w("w_deep_head.json", '{"id": "t", "x": ' + deep + ', "requests": []}')
    w("w_out_1e12.json", json.dumps(_weka([_req(0, out=10**12), _req(1)])))
    w("w_out_1e12_last.json", json.dumps(_weka([_req(0), _req(1, out=10**12)])))
    w("m_out_1e12.jsonl", _jl([_mrow(0, output_length=10**12)]))
    w("w_in_1e30.json", json.dumps(_weka([_req(0, **{"in": 10**30}), _req(1)])))
    w("m_in_1e30.jsonl", _jl([_mrow(0, input_length=10**30)]))
    w("w_in_1e9.json", json.dumps(_weka([_req(0, **{"in": 10**9}), _req(1)])))
    m2 = _jl([_mrow(0), _mrow(1)])
    w("m_ts_inf.jsonl", m2.replace('"timestamp": 1000', '"timestamp": Infinity'))
    w("m_ts_1e308.jsonl", m2.replace('"timestamp": 1000', '"timestamp": 1e308'))
    w("m_ts_nan.jsonl", m2.replace('"timestamp": 1000', '"timestamp": NaN'))
    w("m_delay_inf.jsonl", _jl([_mrow(0, session_id="a"), _mrow(1, session_id="a")]).replace(
        '"timestamp": 1000, ', '"delay": Infinity, ').replace('"timestamp": 0, ', ""))
    w("w_think_inf.json", txt.replace('"think_time": 0.5}]', '"think_time": Infinity}]'))
    w("w_t_inf.json", txt.replace('"t": 1.0', '"t": Infinity'))
    w("w_t_nan.json", txt.replace('"t": 1.0', '"t": NaN'))
    w("w_sub_t_inf.json", json.dumps(_weka([_req(0), {"t": float("inf"), "type": "subagent",
                                                      "requests": [_req(0)]}, _req(1)])))
    w("w_api_inf.json", txt.replace('"api_time": 1.0', '"api_time": Infinity', 1))
    w("w_bs0.json", json.dumps(_weka(two, block_size=0)))
    w("w_bs_neg.json", json.dumps(_weka(two, block_size=-64)))
    w("w_bs_float.json", json.dumps(_weka(two, block_size=64.5)))
    w("w_two_requests.json", txt[:-1] + ', "requests": ' + json.dumps([_req(0, out=7)]) + "}")
    w("w_dup_block_size.json", txt.replace('"block_size": 64',
                                           '"block_size": 64, "block_size": 16'))
    w("m_dup_key.jsonl", _jl([_mrow(0)]).replace('"output_length": 50',
                                                 '"output_length": 50, "output_length": 9'))
    w("w_in_lt_blocks.json", json.dumps(_weka([_req(0, **{"in": 1}), _req(1)])))
    w("w_zero_in.json", json.dumps(_weka([_req(0, **{"in": 0, "out": 0}),
                                          _req(1, **{"in": 0})])))
    w("m_zero.jsonl", _jl([_mrow(0, input_length=0, output_length=0, hash_ids=[])]))
    w("w_float_in.json", txt.replace('"in": 2000', '"in": 2000.0', 1))
    w("m_neg_ts.jsonl", _jl([_mrow(0, timestamp=-5e15), _mrow(1)]))
    w("m_sid_obj.jsonl", _jl([_mrow(0, session_id=True), _mrow(1, session_id=1)]))
    w("w_empty_hash.json", json.dumps(_weka([_req(0, hash_ids=[]), _req(1)])))
    w("w_sub_empty.json", json.dumps(_weka([_req(0), {"t": 0.5, "type": "subagent",
                                                      "requests": []}])))
    nested: list[Any] = [_req(0)]
    for _ in range(40):
        nested = [_req(0), {"t": 0.5, "type": "subagent", "requests": nested}]
    w("w_sub_deep.json", json.dumps(_weka(nested)))
    w("w_agent_id_slash.json", json.dumps(_weka([_req(0), {
        "t": 0.5, "type": "subagent", "agent_id": "../../x\n\u202e", "requests": [_req(0)]}])))
    w("bin.bin", bytes((i * 7 + 131) % 256 for i in range(4096)))
    w("w_trailing.json", txt + " garbage")
    w("w_array.json", "[" + txt + "]")
    w("w_bom.json", "\ufeff" + txt)
    w("w_latin1.json", txt.encode().replace(b'"m"', b'"\xe9"', 1))
    w("m_one_line_nojson.jsonl", "not json\n")
    w("w_id_huge.json", json.dumps(_weka(two, id="x" * 5_000_000)))
    w("w_model_huge.json", json.dumps(_weka([_req(0, model="m" * 5_000_000), _req(1)])))
    w("m_hashids_1e6.jsonl", _jl([_mrow(0, input_length=100, hash_ids=list(range(10**6)))]))
    # the large ones, scaled to just past their bounds
    with (fx / "w_1m.json").open("w") as fh:        # 10^6 requests (~70 MB)
        fh.write('{"id":"big","block_size":64,"requests":[')
        one = '{"t":1.0,"in":2000,"out":20,"hash_ids":[1,2,3,4,5]}'
        fh.write(",".join([one] * 1_000_000))
        fh.write("]}")
    with (fx / "m_1m.jsonl").open("w") as fh:       # 10^6 rows (~80 MB)
        fh.write('{"timestamp":1,"input_length":2000,"output_length":20,"hash_ids":[1,2,3]}\n'
                 * 1_000_000)
    w("w_20k.json", json.dumps(_weka([_req(i % 50) for i in range(20_000)])))
    w("m_20k.jsonl", _jl([_mrow(i % 50) for i in range(20_000)]))
    with (fx / "w_one_huge_elem.json").open("w") as fh:    # one 20 MB request
        fh.write('{"id":"x","block_size":64,"requests":[{"t":0,"in":100,"out":1,"hash_ids":[')
        fh.write("1," * 10_000_000 + "1]}]}")
    with (fx / "m_one_huge_line.jsonl").open("w") as fh:   # one 20 MB line
        fh.write('{"timestamp": 0, "hash_ids": [' + "1," * 10_000_000 + "1]}\n")
    # twin fit points
    ok = ("  - {kind: decode, measured: 100, unit: tok_s, batch: 1, context: 1000}\n"
          "  - {kind: decode, measured: 400, unit: tok_s, batch: 8, context: 1000}\n")
    w("points_ok.yaml", POINTS_HEAD + ok)
    w("points_inf.yaml", POINTS_HEAD + ok.replace("measured: 100", "measured: .inf"))
    w("points_nan_low.yaml", POINTS_HEAD + "  - {kind: decode, measured: 100, unit: tok_s, "
      "batch: 1, context: 1000, low: .nan, high: .nan}\n")
    w("points_huge_ctx.yaml", POINTS_HEAD + "  - {kind: decode, measured: 100, unit: tok_s, "
      "batch: 1000000000000, context: 1000000000000000000000}\n")
    w("points_inf.csv", "kind,measured,unit,batch,context\ndecode,inf,tok_s,1,1000\n"
      "decode,400,tok_s,8,1000\n")
    w("points_bigint.csv", f"kind,measured,unit,batch,context\ndecode,100,tok_s,{big},1000\n")
    w("points_bin.yaml", (fx / "bin.bin").read_bytes())
    w("points_bin.csv", (fx / "bin.bin").read_bytes())
    w("points_empty.yaml", "")
    w("points_list.yaml", "- 1\n- 2\n")
    w("points_weight0.yaml", POINTS_HEAD + "  - {kind: decode, measured: 100, unit: tok_s, "
      "weight: 0}\n")
    w("points_badfree.yaml", POINTS_HEAD.replace("[eta_c]", "[nope]")
      + "  - {kind: decode, measured: 100, unit: tok_s}\n")
    w("points_nopoints.yaml", "hardware: a40\nmodel: qwen3-coder-30b-a3b-awq\npoints: []\n")
    w("points_bomb.yaml", "".join(f"{a}: &{a} [" + ",".join([f"*{p}" if p else "x"] * 10)
                                  + "]\n" for a, p in zip("abcdefgh", ["", *list("abcdefg")],
                                                          strict=True)) + "points: [*h]\n")
    w("points_spec_abs.yaml", POINTS_HEAD + "  - {kind: spec_decode, measured: 1.5, unit: "
      "ratio, spec: 'ngram:4', scenario: /etc/passwd}\n")
    w("points_hw_path.yaml", "hardware: /etc/passwd\nmodel: qwen3-coder-30b-a3b-awq\npoints:\n"
      "  - {kind: decode, measured: 100, unit: tok_s}\n")
    w("points_deep.yaml", "points: " + "[" * 100 + "]" * 100 + "\n")
    # the recall scenario on a model whose window is 16K tokens: it overflows soon
    model = yaml.safe_load((root / "simulator/twin/model/profiles/models/"
                            "qwen3-coder-30b-a3b-awq.yaml").read_text())
    model["context_length"] = 16384
    w("qwen-16k.yaml", yaml.safe_dump(model))
    if not (fx / "fifo").exists():
        os.mkfifo(fx / "fifo")
    for name, minor in (("zero", 5), ("urandom", 9), ("nulldev", 3)):   # private nodes
        if not (fx / name).exists():
            with contextlib.suppress(PermissionError):
                os.mknod(fx / name, 0o666 | 0o020000, os.makedev(1, minor))


# ---------------------------------------------------------------- cases
IW, IM = "$E import weka", "$E import mooncake"
OUT = "-o $T/o.yaml"
RUN = "$E run $T/o.yaml --out $T/r --quiet"
S = "$E run $F/s.yaml --out $T/r --quiet"
CP = "cp -r $BASE $T/r && "
R = "$E check $URL --recall --lengths 0.5k --depths 0.5 --timeout 3"
RS = f"{S} --endpoint $URL --reset-prefix-cache"
SW = "$E sweep $F/s.yaml --out $T/r"
TIGHT = ("--set timeouts.first_byte_s=2 --set timeouts.total_s=4 --set "
         "endpoint.timeout_s=2 --set limits.max_failed_sessions_frac=0")


def _edit_manifest(code: str) -> str:
    return (CP + "$PY -c \"import json;p='$T/r/manifest.json';m=json.load(open(p));"
            + code + ";json.dump(m,open(p,'w'))\" && ")


def cases() -> list[Case]:
    out: list[Case] = []

    def c(name: str, group: str, cmd: str, expect: str = "refuse", **kw: Any) -> None:
        out.append(Case(name, group, cmd, expect, **kw))

    # ---- import: cc-traces
    c("w-ok", "import", f"{IW} $F/w_ok.json {OUT}", "ok")
    for f in ("bigint_in", "bigint_hash", "bigint_bs"):
        c(f"w-{f}", "import", f"{IW} $F/w_{f}.json {OUT}", needle="4300 digits")
    c("w-bigfloat-t-1e400", "import", f"{IW} $F/w_bigfloat_t.json {OUT}", needle="field 't'")
    c("w-deep-100k", "import", f"{IW} $F/w_deep.json {OUT}", needle="nested")
    c("w-deep-head-100k", "import", f"{IW} $F/w_deep_head.json {OUT}", needle="nested")
    c("w-out-1e12", "import", f"{IW} $F/w_out_1e12.json {OUT}", needle="field 'out'")
    c("w-out-1e12-last", "import", f"{IW} $F/w_out_1e12_last.json {OUT}", needle="field 'out'")
    c("w-in-1e30", "import", f"{IW} $F/w_in_1e30.json {OUT}", needle="field 'in'")
    c("w-in-1e9", "import", f"{IW} $F/w_in_1e9.json {OUT}", needle="field 'in'")
    for f, key in (("t_inf", "'t'"), ("t_nan", "'t'"), ("think_inf", "'think_time'"),
                   ("api_inf", "'api_time'"), ("sub_t_inf", "'t'")):
        c(f"w-{f.replace('_', '-')}", "import", f"{IW} $F/w_{f}.json {OUT}",
          needle=f"field {key}")
    c("w-think-inf-run", "import", f"{IW} $F/w_think_inf.json {OUT} && {RUN}",
      needle="think_time")
    c("w-bs0", "import", f"{IW} $F/w_bs0.json {OUT}", needle="block_size")
    c("w-bs-neg", "import", f"{IW} $F/w_bs_neg.json {OUT}", needle="block_size")
    c("w-bs-float", "import", f"{IW} $F/w_bs_float.json {OUT}", needle="block_size")
    c("w-two-requests", "import", f"{IW} $F/w_two_requests.json {OUT}", needle="given twice")
    c("w-dup-block-size", "import", f"{IW} $F/w_dup_block_size.json {OUT}", needle="given twice")
    c("w-in-lt-blocks", "import", f"{IW} $F/w_in_lt_blocks.json {OUT}", needle="hash_ids")
    c("w-zero-in", "import", f"{IW} $F/w_zero_in.json {OUT}", needle="field 'in'")
    c("w-float-in", "import", f"{IW} $F/w_float_in.json {OUT}", needle="field 'in'")
    c("w-empty-hash", "import", f"{IW} $F/w_empty_hash.json {OUT}", "ok")
    c("w-sub-empty", "import", f"{IW} $F/w_sub_empty.json {OUT}")
    c("w-sub-nested-40", "import", f"{IW} $F/w_sub_deep.json {OUT}", needle="nested")
    c("w-agent-id-control", "import", f"{IW} $F/w_agent_id_slash.json {OUT}", "ok")
    c("w-id-5mb", "import", f"{IW} $F/w_id_huge.json {OUT}", needle="field 'id'")
    c("w-model-5mb", "import", f"{IW} $F/w_model_huge.json {OUT}", needle="field 'model'")
    c("w-binary", "import", f"{IW} $F/bin.bin {OUT}", needle="UTF-8")
    c("w-trailing-garbage", "import", f"{IW} $F/w_trailing.json {OUT}", needle="data after")
    c("w-array-top", "import", f"{IW} $F/w_array.json {OUT}")
    c("w-bom", "import", f"{IW} $F/w_bom.json {OUT}", "ok")
    c("w-latin1", "import", f"{IW} $F/w_latin1.json {OUT}", needle="UTF-8")
    c("w-fifo", "import", f"{IW} $F/fifo {OUT}", needle="FIFO")
    c("w-devzero", "import", f"{IW} $F/zero {OUT}", needle="device")
    c("w-devurandom", "import", f"{IW} $F/urandom {OUT}", needle="device")
    c("w-20k-requests", "import", f"{IW} $F/w_20k.json {OUT}", needle="at most 10,000")
    c("w-1m-requests", "import", f"{IW} $F/w_1m.json {OUT}", needle="at most 10,000")
    c("w-one-huge-element", "import", f"{IW} $F/w_one_huge_elem.json {OUT}",
      needle="longer than")
    c("w-out-proc", "import", f"{IW} $F/w_ok.json -o /proc/x.yaml")
    c("w-out-unwritable-dir", "import", f"{IW} $F/w_ok.json -o /sys/kernel/x.yaml")
    c("w-out-device-force", "import", f"{IW} $F/w_ok.json -o $F/nulldev --force",
      "device_kept", needle="not a regular file")
    c("import-then-run-weka-ok", "import", f"{IW} $F/w_ok.json {OUT} && {RUN}", "ok",
      bound_s=2 * CLEAN_S)
    # ---- import: Mooncake
    c("m-ok", "import", f"{IM} $F/m_ok.jsonl {OUT}", "ok")
    c("m-sess-ok", "import", f"{IM} $F/m_sess_ok.jsonl {OUT}", "ok")
    c("m-bigint-in", "import", f"{IM} $F/m_bigint_in.jsonl {OUT}", needle="4300 digits")
    c("m-bigint-hash", "import", f"{IM} $F/m_bigint_hash.jsonl {OUT}", needle="4300 digits")
    c("m-deep-100k", "import", f"{IM} $F/m_deep.jsonl {OUT}", needle="nested")
    c("m-deep-obj-100k", "import", f"{IM} $F/m_deep_obj.jsonl {OUT}", needle="nested")
    c("m-out-1e12", "import", f"{IM} $F/m_out_1e12.jsonl {OUT}", needle="output_length")
    c("m-in-1e30", "import", f"{IM} $F/m_in_1e30.jsonl {OUT}", needle="input_length")
    c("m-hashids-1e6", "import", f"{IM} $F/m_hashids_1e6.jsonl {OUT}", needle="hash_ids")
    for f in ("ts_inf", "ts_1e308", "ts_nan"):
        c(f"m-{f.replace('_', '-')}", "import", f"{IM} $F/m_{f}.jsonl {OUT}",
          needle="timestamp")
    c("m-ts-inf-run", "import", f"{IM} $F/m_ts_inf.jsonl {OUT} && {RUN}", needle="timestamp")
    c("m-ts-1e308-run", "import", f"{IM} $F/m_ts_1e308.jsonl {OUT} && {RUN}",
      needle="timestamp")
    c("m-ts-inf-validate", "import", f"{IM} $F/m_ts_inf.jsonl {OUT} && $E validate $T/o.yaml",
      needle="timestamp")
    c("m-delay-inf", "import", f"{IM} $F/m_delay_inf.jsonl {OUT}", needle="delay")
    c("m-delay-inf-run", "import", f"{IM} $F/m_delay_inf.jsonl {OUT} && {RUN}", needle="delay")
    c("m-dup-key", "import", f"{IM} $F/m_dup_key.jsonl {OUT}", needle="given twice")
    c("m-zero", "import", f"{IM} $F/m_zero.jsonl {OUT}", needle="input_length")
    c("m-neg-ts-5e15", "import", f"{IM} $F/m_neg_ts.jsonl {OUT}", needle="timestamp")
    c("m-session-id-bool", "import", f"{IM} $F/m_sid_obj.jsonl {OUT}", needle="session_id")
    c("m-not-json", "import", f"{IM} $F/m_one_line_nojson.jsonl {OUT}", needle="not JSON")
    c("m-binary", "import", f"{IM} $F/bin.bin {OUT}", needle="UTF-8")
    c("m-fifo", "import", f"{IM} $F/fifo {OUT}", needle="FIFO")
    c("m-devzero", "import", f"{IM} $F/zero {OUT}", needle="device")
    c("m-one-huge-line", "import", f"{IM} $F/m_one_huge_line.jsonl {OUT}", needle="longer than")
    c("m-20k-requests", "import", f"{IM} $F/m_20k.jsonl {OUT}", needle="at most 10,000")
    c("m-1m-requests", "import", f"{IM} $F/m_1m.jsonl {OUT}", needle="at most 10,000")
    c("m-block-size-1", "import", f"{IM} $F/m_ok.jsonl {OUT} --block-size 1", "ok")
    # 4 ids of 1M-token blocks cannot be a 2,000-token prompt's: refused, naming both
    c("m-block-size-1m", "import", f"{IM} $F/m_ok.jsonl {OUT} --block-size 1048576",
      needle="hash_ids")
    # ---- export
    c("xw-ok", "export", "$E export weka $BASE -o $T/o.json", "ok")
    c("xm-ok", "export", "$E export mooncake $BASE -o $T/o.jsonl", "ok")
    c("xw-blocks-garbage-line", "export", CP + "echo 'garbage{' >> $T/r/blocks.jsonl && "
      "$E export weka $T/r -o $T/o.json", needle="blocks.jsonl")
    c("xw-blocks-binary", "export", CP + "head -c 3000 $F/bin.bin > $T/r/blocks.jsonl && "
      "$E export weka $T/r -o $T/o.json", needle="UTF-8")
    c("xw-blocks-keep-str", "export", CP + "sed -i 's/\"keep\": *[0-9]*/\"keep\": \"abc\"/' "
      "$T/r/blocks.jsonl && $E export weka $T/r -o $T/o.json", needle="'keep'")
    for fmt, ext in (("weka", "json"), ("mooncake", "jsonl")):
        x = fmt[0]
        c(f"x{x}-blocks-new-int", "export", CP + "sed -i 's/\"new\": *\\[[^]]*\\]/\"new\": 5/' "
          f"$T/r/blocks.jsonl && $E export {fmt} $T/r -o $T/o.{ext}", needle="'new'")
        c(f"x{x}-turns-started-str", "export", CP + "sed -i 's/\"started_mono_s\": *[0-9.e-]*/"
          f"\"started_mono_s\": \"x\"/' $T/r/turns.jsonl && $E export {fmt} $T/r -o $T/o.{ext}",
          needle="started_mono_s")
        c(f"x{x}-out-is-own-journal", "export", CP + f"$E export {fmt} $T/r -o "
          "$T/r/turns.jsonl --force", "journal_kept", needle="inside the run directory")
    c("xm-turns-prompt-list", "export", CP + "sed -i 's/\"prompt_tokens\": *[0-9]*/"
      "\"prompt_tokens\": [1]/' $T/r/turns.jsonl && $E export mooncake $T/r -o $T/o.jsonl",
      needle="prompt_tokens")
    c("xw-turns-binary", "export", CP + "head -c 3000 $F/bin.bin >> $T/r/turns.jsonl && "
      "$E export weka $T/r -o $T/o.json", needle="UTF-8")
    c("xw-manifest-replay-str", "export", _edit_manifest(
        "m['scenario_resolved']['replay']={'sessions':[{'parent':'x'}]}")
      + "$E export weka $T/r -o $T/o.json", needle="parent")
    c("xw-manifest-list", "export", CP + "echo '[1,2]' > $T/r/manifest.json && "
      "$E export weka $T/r -o $T/o.json")
    c("xw-running-run", "export", _edit_manifest("m['status']='running'")
      + "rm $T/r/turns.parquet $T/r/summary.json && $E export weka $T/r -o $T/o.json",
      needle="running")
    c("xw-interrupted-run", "export", _edit_manifest("m['status']='interrupted'")
      + "$E export weka $T/r -o $T/o.json", needle="interrupted")
    c("xw-old-version", "export", _edit_manifest("m['versions']['endurance']='0.0.1'")
      + "$E export weka $T/r -o $T/o.json", needle="0.0.1")
    c("xw-no-blocks", "export", CP + "rm $T/r/blocks.jsonl && $E export weka $T/r -o "
      "$T/o.json")
    c("xw-missing-dir", "export", "$E export weka $T/nope -o $T/o.json")
    c("xw-out-proc", "export", "$E export weka $BASE -o /proc/x.json", needle="cannot write")
    c("xm-out-proc", "export", "$E export mooncake $BASE -o /proc/x.jsonl",
      needle="cannot write")
    c("xm-out-nodir", "export", "$E export mooncake $BASE -o $T/nope/d/x.jsonl",
      needle="cannot write")
    c("xw-out-sys", "export", "$E export weka $BASE -o /sys/kernel/x.json",
      needle="cannot write")
    c("xm-out-is-dir", "export", "$E export mooncake $BASE -o $T", needle="is a folder")
    c("xm-out-is-dir-force", "export", "$E export mooncake $BASE -o $T --force",
      needle="is a folder")
    c("xw-out-device-force", "export", "$E export weka $BASE -o $F/nulldev --force",
      "device_kept", needle="not a regular file")
    # ---- twin fit / points
    c("fit-ok", "twin", "$E twin fit $F/points_ok.yaml", "ok")
    for f in ("bin.yaml", "bin.csv", "inf.yaml", "inf.csv", "nan_low.yaml", "huge_ctx.yaml",
              "bigint.csv", "empty.yaml", "list.yaml", "weight0.yaml", "badfree.yaml",
              "nopoints.yaml", "bomb.yaml", "deep.yaml", "hw_path.yaml", "spec_abs.yaml"):
        c(f"fit-{f.replace('.', '-').replace('_', '-')}", "twin", f"$E twin fit $F/points_{f}")
    c("fit-fifo", "twin", "$E twin fit $F/fifo", needle="FIFO")
    c("fit-inf-csv-hw", "twin", "$E twin fit $F/points_inf.csv --hardware a40 --model "
      "qwen3-coder-30b-a3b-awq --free eta_c", needle="measured")
    c("fit-free-empty", "twin", "$E twin fit $F/points_ok.yaml --free ,", needle="--free")
    c("points-ok", "twin", "$E twin points $BASE -o $T/p.yaml", "ok")
    c("points-out-proc", "twin", "$E twin points $BASE -o /proc/x.yaml", needle="cannot write")
    c("points-out-nodir", "twin", "$E twin points $BASE -o $T/nope/d/p.yaml",
      needle="cannot write")
    c("points-out-own-parquet", "twin", CP + "$E twin points $T/r -o $T/r/turns.parquet",
      "parquet_kept", needle="inside the run directory")
    c("points-parquet-garbage", "twin", CP + "cp $F/bin.bin $T/r/turns.parquet && "
      "$E twin points $T/r -o $T/p.yaml", needle="parquet")
    c("points-multi-session", "twin", "$E run $F/s.yaml --sessions 3 --out $T/rr --quiet "
      ">/dev/null && $E twin points $T/rr/* -o $T/p.yaml", needle="3 sessions")
    # ---- host KV tier
    for v, expect in (("1e308", "refuse"), ("inf", "refuse"), ("nan", "refuse"),
                      ("1e6", "ok"), ("-1", "refuse")):
        c(f"run-kv-offload-{v}", "tier", f"{S} --kv-offload-gib {v}", expect)
    for v in ("inf", "nan", "1e308"):
        c(f"serve-kv-offload-{v}", "tier", f"$E twin serve --port 0 --kv-offload-gib {v}",
          needle="--kv-offload-gib")
    for v in ("nan", "inf", "1e308", ",,"):
        c(f"sweep-kv-offload-{v.replace(',', 'c')}", "tier-lead",
          f"$E sweep $F/s.yaml --sessions 1 --out $T/r --kv-offload-gib '{v}'")
    c("size-kv-offload-inf", "tier-lead", "$E size $F/s.yaml --slo 'ttft_p95_s<=5' "
      "--max-sessions 2 --out $T/r --kv-offload-gib inf")
    c("size-kv-offload-1e308", "tier-lead", "$E size $F/s.yaml --slo 'ttft_p95_s<=5' "
      "--max-sessions 2 --out $T/r --kv-offload-gib 1e308")
    c("run-set-kv-offload-inf", "tier", f"{S} --set twin.kv_offload_gib=.inf")
    c("validate-kv-offload-1e308", "tier", "$E validate $F/s.yaml --set "
      "twin.kv_offload_gib=1e308", needle="kv_offload_gib")
    # ---- fleet
    for v in ("0", "1025", "1,2", "abc", "''", "1e3", "1024"):
        c(f"run-replicas-{v.strip(chr(39)) or 'empty'}", "fleet", f"{S} --replicas {v}")
    c("run-replicas-64", "fleet", f"{S} --replicas 64", "ok")
    c("run-router-bogus", "fleet", f"{S} --router bogus")
    c("run-route-twin", "fleet", f"{S} --route least_loaded", needle="--route")
    c("run-replicas-with-endpoint", "fleet", f"{S} --replicas 4 --endpoint $URL",
      server="twin", needle="--replicas")
    c("run-router-with-endpoint", "fleet", f"{S} --router kv_cost --endpoint $URL",
      server="twin", needle="--router")
    c("run-endpoint-twice-same", "fleet", f"{S} --endpoint $URL --endpoint $URL --route "
      "round_robin", server="twin")
    c("run-endpoint-second-bad", "fleet", f"{S} --endpoint $URL --endpoint ftp://x:99999",
      server="twin")
    c("run-endpoint-second-dead", "fleet", f"{S} --endpoint $URL --endpoint "
      "http://127.0.0.1:9 --route round_robin", server="twin")
    c("run-endpoint-200", "fleet", f"{S} " + "--endpoint $URL " * 200, server="twin")
    c("run-route-and-router", "fleet", f"{S} --route round_robin --router kv_cost",
      needle="--route and --router")
    c("sweep-endpoint-twice", "fleet", "$E sweep $F/s.yaml --sessions 1 --out $T/r "
      "--endpoint http://127.0.0.1:9 --endpoint http://127.0.0.1:10")
    c("sweep-replicas-dup", "fleet", "$E sweep $F/s.yaml --sessions 1 --out $T/r "
      "--replicas 1,1", needle="twice")
    c("sweep-replicas-0", "fleet", "$E sweep $F/s.yaml --sessions 1 --out $T/r --replicas 0,1")
    c("serve-replicas-65", "fleet", "$E twin serve --port 0 --replicas 65")
    c("run-replicas-workers", "fleet", f"{S} --replicas 2 --workers 2")
    # ---- check --recall
    c("recall-echo-baseline", "recall", R, "ok", server="ok/echo")
    c("recall-twin-baseline", "recall", R, "ok", server="twin")
    for m in ("garbage", "blackhole", "ping", "trickle", "gb", "ooo", "neverclose", "html",
              "notfound"):
        c(f"recall-post-{m}", "recall", R, "fail1", server=f"ok/{m}")
    for m in ("garbage", "blackhole", "gb"):
        c(f"recall-get-{m}", "recall", R, "refuse", server=f"{m}/echo",
          needle="GET /v1/models")
    c("recall-get-html", "recall", R, "ok", server="html/echo")
    c("recall-timeout-whole", "recall", "$E check $URL --recall --timeout 3", "fail1",
      server="ok/blackhole")
    c("recall-with-against", "recall", R + " --against http://127.0.0.1:9",
      server="ok/echo", needle="--against")
    c("recall-with-openai", "recall", R + " --api openai-chat", server="ok/echo",
      needle="Anthropic Messages only")
    c("check-lengths-without-recall", "recall", "$E check $URL --lengths 1m --timeout 10",
      server="ok/echo", needle="only with --recall")
    for v in ("0", "nan", "1e30", "''", "2m"):
        c(f"recall-lengths-{v.strip(chr(39)) or 'empty'}", "recall",
          f"$E check $URL --recall --lengths {v} --depths 0.5 --timeout 30", server="ok/echo")
    c("recall-lengths-1m", "recall", "$E check $URL --recall --lengths 1m --depths 0.5 "
      "--timeout 30", "fail1", server="ok/echo")
    for v in ("nan", "2", "-0.1", "''", "inf"):
        c(f"recall-depths-{v.strip(chr(39)) or 'empty'}", "recall",
          f"$E check $URL --recall --lengths 0.5k --depths {v} --timeout 10", server="ok/echo")
    for v in ("0", "101", "-1"):
        c(f"recall-repeats-{v}", "recall", R + f" --repeats {v}", server="ok/echo")
    c("recall-many-lengths", "recall", "$E check $URL --recall --depths 0.5 --timeout 30 "
      "--lengths $(seq -s, 256 1 455)", "ok", server="ok/echo")
    # ---- --reset-prefix-cache
    for m in ("garbage", "blackhole", "html", "reset_false", "notfound", "gb", "trickle"):
        c(f"reset-{m}", "reset", RS, "refuse", server=f"ok/{m}",
          needle="--reset-prefix-cache")
    c("reset-twin-ok", "reset", RS, "ok", server="twin")
    c("reset-without-endpoint", "reset", f"{S} --reset-prefix-cache")
    c("reset-sweep-parallel", "reset", "$E sweep $F/s.yaml --sessions 1,2 --out $T/r "
      "--endpoint $URL --reset-prefix-cache --parallel 2", server="twin")
    # ---- sweep --set lists, --copy (the lead's files; refusals only)
    c("set-list-empty", "sweep-lead", f"{SW} --set 'seed=,,,'")
    c("set-list-dup", "sweep-lead", f"{SW} --set seed=1,1")
    c("set-list-bad-value", "sweep-lead", f"{SW} --set compaction.kind=none,bogus")
    c("set-list-two-keys", "sweep-lead", f"{SW} --set seed=1,2 --set turns=1,2")
    c("set-list-sessions-list", "sweep-lead", f"{SW} --set seed=1,2 --sessions 1,2")
    c("set-list-unknown-key", "sweep-lead", f"{SW} --set nope=1,2")
    c("set-list-with-copy", "sweep-lead", f"{SW} --set seed=1,2 --copy 0,1")
    c("set-list-yaml-inline", "sweep-lead", f"{SW} --set 'seed=[1,2]'")
    for v in ("0", "nan,1", "0,inf", "-1,1", "0,0", ",,", "0,1e-300"):
        c(f"copy-{v.replace(',', 'c')}", "sweep-lead", f"{SW} --sessions 1 --copy '{v}'")
    c("copy-no-code-edit", "sweep-lead", f"{SW} --sessions 1 --copy 0,1")
    c("sweep-sessions-empty", "sweep-lead", f"{SW} --sessions ,,,")
    c("sweep-sessions-huge", "sweep-lead", f"{SW} --sessions 100000000")
    # ---- the pre-flight and attempts against servers that never answer
    c("preflight-blackhole-default", "preflight", f"{S} --endpoint $URL", "refuse1",
      server="blackhole/echo", bound_s=65.0, needle="timeouts.preflight_s")
    c("preflight-trickle-default", "preflight", f"{S} --endpoint $URL", "refuse1",
      server="trickle/echo", bound_s=65.0, needle="timeouts.preflight_s")
    c("preflight-blackhole-tight", "preflight", f"{S} --endpoint $URL --set "
      "timeouts.first_byte_s=2 --set timeouts.total_s=5", "refuse1", server="blackhole/echo")
    c("attempt-blackhole-tight", "preflight", f"{S} --endpoint $URL {TIGHT}", "fail1",
      server="ok/blackhole")
    c("attempt-ping-tight", "preflight", f"{S} --endpoint $URL {TIGHT}", "fail1",
      server="ok/ping")
    c("check-blackhole-timeout", "preflight", "$E check $URL --timeout 5", "refuse1",
      server="blackhole/blackhole")
    # ---- resume, Ctrl-C, counts (scripts of their own)
    c("resume-cut-last-turn", "resume", "$PY $HERE/hostile_round3.py resume-cut $F/s4.yaml $T",
      "script")
    c("resume-cut-mid-session", "resume", "$PY $HERE/hostile_round3.py resume-cut $F/s4.yaml "
      "$T --mid", "script")
    c("resume-cut-http", "resume", "$PY $HERE/hostile_round3.py resume-cut $F/s4.yaml $T "
      "--endpoint $URL", "script", server="twin")
    c("workers-ctrl-c-startup", "resume", "$PY $HERE/hostile_round3.py ctrl-c "
      "$F/s_workers.yaml $T $URL", "script", server="twin")
    c("sigint-driver-startup", "resume", "$PY $HERE/hostile_round3.py ctrl-c-driver "
      "$F/s.yaml $T", "script")
    c("counts-overflow-crossed", "counts", "$E run $ROOT/scenarios/claude-code-recall.yaml "
      "--set twin.model=$F/qwen-16k.yaml --set compaction.kind=none --turns 80 --out $T --quiet "
      "> /dev/null && $PY $HERE/hostile_round3.py counts $T/*/", "script")
    return out


# ---------------------------------------------------------------- verdicts
def load_factor() -> float:
    """The machine's 1-minute load average per core, at least 1: the bounds are for an
    idle machine, and shared CI boxes run several jobs."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def verdict(case: Case, rc: int | None, out: str, secs: float, t: Path, fx: Path,
            factor: float = 1.0) -> str:
    if rc is None:
        return "hang"
    if "Traceback" in out or "panicked" in out or rc not in (0, 1, 2, 130):
        return "traceback"
    lines = [x for x in out.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error: ")]
    e = case.expect
    if e in ("refuse", "refuse1", "device_kept", "journal_kept", "parquet_kept"):
        codes = (1,) if e == "refuse1" else (1, 2)
        good = rc in codes and len(errors) == 1 and case.needle in errors[0]
        if e == "device_kept":
            good = good and (fx / "nulldev").exists() and not (fx / "nulldev").is_file()
        if e == "journal_kept":
            good = good and (t / "r" / "turns.jsonl").read_text().count("\n") >= 1
        if e == "parquet_kept":
            good = good and (t / "r" / "turns.parquet").read_bytes()[:4] == b"PAR1"
        kind = "clean" if good else ("nonsense" if rc == 0 else "other")
    elif e == "ok":
        kind = "clean" if rc == 0 else "other"
    elif e == "fail1":
        kind = "clean" if rc == 1 else ("nonsense" if rc == 0 else "other")
    elif e == "script":
        kind = "clean" if rc == 0 else ("count" if rc == 4 else "other")
    else:
        raise ValueError(e)
    if kind == "clean" and secs > case.bound_s * factor:
        return "slow"
    return kind


# ---------------------------------------------------------------- scripts
def _endurance(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True,
                          text=True, timeout=120, **kw)


def resume_cut(argv: list[str]) -> int:
    """The state a SIGKILL leaves between a turn's history line and its turn row, built
    exactly, then `--resume`: every row of the uninterrupted run must come back."""
    scen, work = argv[0], Path(argv[1])
    mid = "--mid" in argv
    extra = [a for a in argv[2:] if a != "--mid"]
    p = _endurance("run", scen, "--out", str(work), "--quiet", *extra)
    run = Path(p.stdout.strip().splitlines()[-1])
    turns = (run / "turns.jsonl").read_text().splitlines(keepends=True)
    hist = (run / "history.jsonl").read_text().splitlines(keepends=True)

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["session_id"], r["turn_index"], r["request_kind"], r["attempt"])

    full = {key(json.loads(x)) for x in turns}
    if mid:     # killed after turn 1's history line: turns 2.. never ran
        cut = [x for x in turns if json.loads(x)["turn_index"] < 1]
        (run / "history.jsonl").write_text("".join(x for x in hist
                                                   if json.loads(x).get("turn", 0) <= 1))
    else:
        cut = turns[:-1]
    (run / "turns.jsonl").write_text("".join(cut))
    m = json.loads((run / "manifest.json").read_text())
    m["status"] = "running"
    (run / "manifest.json").write_text(json.dumps(m))
    for f in ("turns.parquet", "summary.json", "server_metrics.parquet"):
        (run / f).unlink(missing_ok=True)
    t0 = time.monotonic()
    r = _endurance("run", "--resume", str(run), "--quiet")
    got = {key(json.loads(x)) for x in (run / "turns.jsonl").read_text().splitlines()}
    print(f"rows: full run {len(full)}, after the cut {len(cut)}, after --resume {len(got)} "
          f"(exit {r.returncode}, {time.monotonic() - t0:.1f} s); missing "
          f"{sorted(full - got)}")
    return 0 if r.returncode == 0 and full <= got else 3


def ctrl_c(argv: list[str]) -> int:
    """Ctrl-C (SIGINT to the run's process group) once the `--workers 2` run's workers
    exist, i.e. while they start: exit 130, no traceback."""
    scen, work, url = argv[0], Path(argv[1]), argv[2]
    p = subprocess.Popen([sys.executable, "-m", "simulator", "run", scen, "--endpoint", url,
                          "--workers", "2", "--out", str(work), "--quiet",
                          "--stop-grace-s", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    end = time.monotonic() + 60
    while not any(work.glob("*/workers/w*")) and time.monotonic() < end \
            and p.poll() is None:
        time.sleep(0.01)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    bad = "Traceback" in err or "KeyboardInterrupt" in err
    print(f"exit {p.returncode}; tracebacks {err.count('Traceback')}; last "
          f"{err.strip().splitlines()[-1:]}")
    return 0 if p.returncode == 130 and not bad else 3


def ctrl_c_driver(argv: list[str]) -> int:
    """Ctrl-C to the driver while it imports and starts (0.5–2.5 s): exit 130, one line."""
    scen, work = argv[0], Path(argv[1])
    worst = 0
    for delay in (0.5, 1.5, 2.5):
        p = subprocess.Popen([sys.executable, "-m", "simulator", "run", scen, "--out",
                              str(work / str(delay)), "--quiet"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(delay)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
        ok = p.returncode in (130, 0) and "Traceback" not in err and "Aborted" not in err
        print(f"SIGINT at {delay} s: exit {p.returncode}, {err.strip().splitlines()[-1:]}")
        worst = max(worst, 0 if ok else 3)
    return worst


def counts(argv: list[str]) -> int:
    """Probes of facts a forced (overflow) compaction dropped must count it as crossed."""
    rows = [json.loads(x) for x in (Path(argv[0]) / "turns.jsonl").read_text().splitlines()]
    forced = sorted({(r["session_id"], r["turn_index"]) for r in rows
                     if str(r.get("compaction") or "").startswith("overflow")})
    probes = [r for r in rows if r["request_kind"] == "probe"]
    bad = [r for r in probes if r.get("fact_retained") == "dropped"
           and r.get("fact_compactions_crossed") == 0]
    print(f"forced compactions {len(forced)}; {len(probes)} probes; {len(bad)} probes of a "
          "dropped fact report fact_compactions_crossed = 0")
    return 4 if bad or not forced else 0


SCRIPTS: dict[str, Callable[[list[str]], int]] = {
    "resume-cut": resume_cut, "ctrl-c": ctrl_c, "ctrl-c-driver": ctrl_c_driver,
    "counts": counts}


# ---------------------------------------------------------------- servers, running
LYING = {"ok": "models_ok", "echo": "echo", "garbage": "garbage_status",
         "blackhole": "silent", "ping": "pings", "trickle": "trickle", "gb": "json_gb",
         "ooo": "out_of_order", "neverclose": "never_closes", "html": "html_200",
         "notfound": "not_found", "reset_false": "reset_refused"}


@contextmanager
def server(spec: str | None) -> Iterator[str]:
    if spec is None:
        yield ""
        return
    if spec == "twin":
        from tests.reliability_twin import TwinThread
        with TwinThread(time_scale=1000.0) as twin:
            yield twin.url
        return
    import tests.lying_servers as ls
    get, post = spec.split("/")
    with ls.lying_server(getattr(ls, LYING[post]), getattr(ls, LYING[get]),
                         every_get=True) as url:
        yield url


def _cap() -> None:
    import resource
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_case(case: Case, env: dict[str, str], t: Path, fx: Path
             ) -> tuple[str, int | None, float, str, float]:
    t.mkdir(parents=True)
    factor = load_factor()
    with server(case.server) as url:
        t0 = time.monotonic()
        p = subprocess.Popen(["bash", "-c", case.cmd], env={**env, "T": str(t), "URL": url},
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", preexec_fn=_cap)
        try:
            out, _ = p.communicate(timeout=HANG_S)
            rc: int | None = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
            out = ""
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)     # anything the case left behind
            p.wait()
        secs = time.monotonic() - t0
    return verdict(case, rc, out, secs, t, fx, factor), rc, secs, out, factor


@dataclass
class Tally:
    by_kind: dict[str, int] = field(default_factory=dict)
    by_group: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, group: str, kind: str) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        g = self.by_group.setdefault(group, {})
        g[kind] = g.get(kind, 0) + 1


Report = Callable[[str, str, int | None, float, str], None]
RunCase = Callable[[Case, dict[str, str], Path, Path], tuple[str, int | None, float, str, float]]


def tally_cases(cases: Iterable[Case], run: RunCase, env: dict[str, str], tmp: Path,
                fx: Path, only: str = "", group: str = "",
                report: Report | None = None) -> Tally:
    """Run the cases `only` / `group` select (a round's own `run`), tallied by group."""
    tally = Tally()
    for i, case in enumerate(cases):
        if (only and only not in case.name) or (group and group != case.group):
            continue
        kind, rc, secs, out, factor = run(case, env, tmp / f"c{i}", fx)
        tally.add(case.group, kind)
        if report is not None:
            name = f"{case.name} (load ×{factor:.1f})" if factor > 1 else case.name
            report(name, kind, rc, secs, out)
    return tally


def case_env(root: Path, fx: Path, here: Path) -> dict[str, str]:
    """The environment every round's case scripts read: $E (the CLI), $PY, $F (the
    fixtures), $ROOT, $HERE (the round's folder) and a wide terminal."""
    return {**os.environ, "PYTHONPATH": str(root), "E": f"{sys.executable} -m simulator",
            "PY": sys.executable, "F": str(fx), "ROOT": str(root), "HERE": str(here),
            "COLUMNS": "200"}


def base_run(env: dict[str, str], fx: Path, tmp: Path, root: Path) -> str:
    """The folder of a finished run of the fixtures' scenario ($BASE of the cases)."""
    base = subprocess.run([sys.executable, "-m", "simulator", "run", str(fx / "s.yaml"),
                           "--out", str(tmp / "base"), "--quiet"], capture_output=True,
                          text=True, env=env, timeout=300, cwd=root)
    return base.stdout.strip().splitlines()[-1]


def run_all(root: Path, tmp: Path, only: str = "", group: str = "",
            report: Callable[[str, str, int | None, float, str], None] | None = None) -> Tally:
    fx = tmp / "fixtures"
    make_fixtures(fx, root)
    env = case_env(root, fx, Path(__file__).resolve().parent)
    base = _endurance("run", str(fx / "s.yaml"), "--out", str(tmp / "base"), "--quiet",
                      "--set", "record_blocks=true", env={**env})
    env["BASE"] = base.stdout.strip().splitlines()[-1]
    return tally_cases(cases(), run_case, env, tmp, fx, only, group, report)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(SCRIPTS[sys.argv[1]](sys.argv[2:]))
