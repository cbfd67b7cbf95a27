"""`endurance twin fit` with hostile spec_replay points and profiles (issue 49): token
ids that are negative or fractional, an exchanges file nested deep, a device or a FIFO,
a 1.2M-token reply, n-gram settings that make no sense, a million streams, a lookup of
1e12, a point in seconds against a tok/s prediction, a binary profile given as --model
or inside --from-twin. Each is one `error:` line, exit 2, within a few seconds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.twin.model.fit import Observation, predict
from simulator.twin.model.perf_model import build_perf_model

HEAD = "hardware: cpu-2core\nmodel: smollm2-135m\nfit: [spec_step_s]\npoints:\n"
POINT = ("  - {{kind: spec_replay, spec: '{spec}', prompt_lookup_min: {lo}, "
         "prompt_lookup_max: {hi}, exchanges: {ex}, measured: 50, unit: {unit}, "
         "batch: {batch}}}\n")
GOOD = [[list(range(40)), [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4]]] * 2


def fit(tmp_path: Path, *, exchanges: object = GOOD, raw: bytes | None = None,
        ex_path: str | None = None, spec: str = "ngram:4", lo: object = 2, hi: object = 4,
        unit: str = "tok_s", batch: object = 1, extra: tuple[str, ...] = ()
        ) -> tuple[int, list[str], float]:
    """`twin fit` on one spec_replay point: exit code, output lines, wall seconds."""
    ex = tmp_path / "ex.json"
    if ex_path is None:
        ex.write_bytes(raw if raw is not None else json.dumps(exchanges).encode())
    points = tmp_path / "p.yaml"
    points.write_text(HEAD + POINT.format(spec=spec, lo=lo, hi=hi, ex=ex_path or ex.name,
                                          unit=unit, batch=batch), encoding="utf-8")
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["twin", "fit", str(points), *extra])
    return r.exit_code, r.output.strip().splitlines(), time.monotonic() - t0


def refused(tmp_path: Path, needle: str, **kw: object) -> None:
    code, lines, wall = fit(tmp_path, **kw)   # type: ignore[arg-type]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert needle in lines[0], lines[0]
    assert wall < 20


CASES: list[tuple[str, dict[str, object], str]] = [
    ("negative-token", {"exchanges": [[[1, 2], [3, -5]]]},
     "exchange 0 reply, token 1: -5 is not a token id"),
    ("huge-token", {"exchanges": [[[1, 2 ** 70], [3]]]},
     "exchange 0 prompt, token 1: a number of 16+ digits is not a token id"),
    ("fractional-token", {"exchanges": [[[1, 2.5], [3]]]},
     "exchange 0 prompt, token 1: '2.5' is not a whole-number token id"),
    ("bool-token", {"exchanges": [[[True], [3]]]}, "is not a whole-number token id"),
    ("deep-json", {"raw": b"[" * 100_000 + b"]" * 100_000}, "nested deeper than"),
    ("not-json", {"raw": b"[[1,2],"}, "not JSON"),
    ("binary", {"raw": bytes(range(128, 256))}, "not UTF-8 text"),
    ("not-pairs", {"exchanges": [[1, 2, 3]]}, "exchange 0: expected [prompt ids, reply ids]"),
    ("1.2M-token-reply", {"exchanges": [[[1], list(range(1000)) * 1200]]},
     "1,200,001 tokens of prompt and reply (at most 262,144)"),
    ("dev-zero", {"ex_path": "/dev/zero"}, "a device, not a regular exchanges file"),
    ("ngram-0", {"spec": "ngram:0"}, "speculative decoding must be one of"),
    ("ngram-abc", {"spec": "ngram:abc"}, "speculative decoding must be one of"),
    ("draft-spec", {"spec": "draft:4"}, "spec must be ngram:K"),
    ("lookup-min-above-max", {"lo": 6, "hi": 4},
     "prompt_lookup_min 6 is above prompt_lookup_max 4"),
    ("lookup-1e12", {"hi": "1e12"}, "points.0.prompt_lookup_max"),
    ("batch-1048576", {"batch": 1048576}, "spec_replay with 1,048,576 streams: at most 1,024"),
    ("replay-too-long", {"exchanges": [[list(range(5000)), list(range(5000))]] * 200,
                         "batch": 2},
     "tokens to replay per prediction (at most 2,000,000)"),
    ("unit-seconds", {"unit": "s"}, "a spec_replay point is measured in tok_s, not s"),
]


@pytest.mark.parametrize(("kw", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_spec_replay_point_is_one_line(tmp_path: Path, kw: dict[str, object],
                                                 needle: str) -> None:
    refused(tmp_path, needle, **kw)


def test_an_exchanges_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    refused(tmp_path, "a FIFO, not a regular exchanges file", ex_path=fifo.name)


def test_an_exchange_longer_than_the_twins_kv_cache_is_named(tmp_path: Path) -> None:
    kv = build_perf_model("cpu-2core", "smollm2-135m", spec="ngram:4").kv_capacity_tokens()
    assert kv < 262_144            # the case needs an exchange the file bound lets through
    refused(tmp_path, f"exchange 0: {kv + 1:,} tokens exceed the twin's KV cache",
            exchanges=[[[1] * 10, [2] * (kv - 9)]])


def test_a_clean_spec_replay_point_still_fits(tmp_path: Path) -> None:
    code, lines, _ = fit(tmp_path)
    assert code == 0, lines
    assert any("spec_step_s" in line for line in lines)


def test_a_decode_point_in_seconds_is_refused_too() -> None:
    with pytest.raises(ValueError, match="a decode point is measured in tok_s, not s"):
        Observation(kind="decode", measured=1.0, unit="s", batch=1, context=100)
    ok = Observation(kind="prefill", measured=1.0, unit="s", prompt_tokens=100)
    assert predict(build_perf_model("a40", "qwen3-coder-30b-a3b-awq"), ok) > 0


# ------------------------------------------------------------ profiles -----------
def test_a_binary_profile_is_one_line_for_twin_fit(tmp_path: Path) -> None:
    binary = tmp_path / "model.yaml"
    binary.write_bytes(bytes(range(128, 256)) * 8)
    for option in ("--model", "--hardware"):
        refused(tmp_path, f"{binary}: not UTF-8 text", extra=(option, str(binary)))


SCENARIO = str(Path(__file__).resolve().parents[3] / "scenarios" / "calibration"
               / "twin-vs-vllm-cpu.yaml")


@pytest.mark.parametrize(("value", "needle"), [
    ("", "--from-twin '': give the twin as HARDWARE/MODEL"),
    ("  ", "--from-twin ' ': give the twin as HARDWARE/MODEL"),   # the line's spaces fold
    ("a40", "--from-twin must look like HARDWARE/MODEL"),
    ("a40/q/x", "--from-twin must look like HARDWARE/MODEL"),
    ("a40/nonexistent", "--from-twin a40/nonexistent: unknown model 'nonexistent'"),
    ("BINARY/smollm2-135m", "not UTF-8 text"),
    ("cpu-2core/BINARY", "not UTF-8 text"),
], ids=["blank", "spaces", "no-model", "two-slashes", "unknown-model", "binary-hardware",
        "binary-model"])
def test_from_twin_is_checked_as_typed(tmp_path: Path, value: str, needle: str) -> None:
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(128, 256)) * 8)
    r = CliRunner().invoke(main, [
        "size", SCENARIO, "--endpoint", "http://127.0.0.1:9", "--ramp", "1,2",
        "--slo", "per_session_tok_s>=9", "--from-twin",
        value.replace("BINARY", str(binary)), "--out", str(tmp_path / "out")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert needle in lines[0] and "--twin " not in lines[0], lines[0]
    assert not (tmp_path / "out").exists()
