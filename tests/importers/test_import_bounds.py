"""Bounded trace importers (issue 38 item 1): every number of a cc-traces or Mooncake
file is read with a bound and a unit, duplicate keys and trailing data are refused,
nesting is bounded, special files are refused before they are opened, and a trace too
large to import is refused while streaming with the limit named — each in one line,
exit 2, naming the file, the request and the field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.importers import mooncake, trace_stream, weka
from simulator.util import bounded


def _req(i: int, **kw: Any) -> dict[str, Any]:
    d = {"t": float(i), "type": "s", "model": "m", "in": 2000 + 100 * i, "out": 50,
         "hash_ids": list(range(1, 32 + 2 * i)), "think_time": 1.0, "api_time": 2.0}
    d.update(kw)
    return d


def _weka(reqs: list[Any], **head: Any) -> str:
    return json.dumps({"id": "t", "block_size": 64, "tool_tokens": 100, "system_tokens": 100,
                       **head, "requests": reqs})


def _row(i: int, **kw: Any) -> dict[str, Any]:
    d = {"timestamp": 1000 * i, "input_length": 2000, "output_length": 20,
         "hash_ids": [1, 2, 3 + i]}
    d.update(kw)
    return d


def _jl(rows: list[Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _refused(fmt: str, path: Path, *needles: str) -> str:
    r = CliRunner().invoke(main, ["import", fmt, str(path), "-o",
                                  str(path.parent / "o.yaml")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    for n in (str(path), *needles):
        assert n in lines[0], (n, lines[0])
    assert not (path.parent / "o.yaml").exists()
    return lines[0]


BIG = "9" * 5000
TWO = [_req(0), _req(1)]

WEKA_CASES = [
    ("int-5000-digits", _weka(TWO).replace('"in": 2000', f'"in": {BIG}', 1),
     ["request 0", "more than 4300 digits"]),
    ("id-5000-digits", _weka(TWO).replace('"hash_ids": [1,', f'"hash_ids": [{BIG},', 1),
     ["request 0", "4300 digits"]),
    ("block-size-5000-digits", _weka(TWO).replace('"block_size": 64', f'"block_size": {BIG}'),
     ["4300 digits"]),
    ("t-1e400", _weka(TWO).replace('"t": 1.0', '"t": 1e400', 1),
     ["request 1", "field 't'", "finite"]),
    ("t-infinity", _weka(TWO).replace('"t": 1.0', '"t": Infinity', 1),
     ["request 1", "field 't'", "finite"]),
    ("think-infinity", _weka(TWO).replace('"think_time": 1.0', '"think_time": Infinity', 1),
     ["request 0", "field 'think_time'", "finite"]),
    ("api-time-infinity", _weka(TWO).replace('"api_time": 2.0', '"api_time": Infinity', 1),
     ["request 0", "field 'api_time'"]),
    ("subagent-t-infinity", _weka([_req(0), {"t": "X", "type": "subagent",
                                             "requests": [_req(0)]}]).replace('"X"', "Infinity"),
     ["request 1", "field 't'"]),
    ("t-a-century", _weka([_req(0), _req(1, t=3.2e9)]), ["request 1", "field 't'", "more than"]),
    ("block-size-0", _weka(TWO, block_size=0), ["field 'block_size'", "not within [1"]),
    ("in-0", _weka([_req(0, **{"in": 0, "hash_ids": []})]), ["request 0", "field 'in'"]),
    ("in-1e30", _weka([_req(0, **{"in": 10**30})]), ["request 0", "field 'in'", "31+-digit"]),
    ("in-1e9", _weka([_req(0, **{"in": 10**9})]), ["request 0", "field 'in'", "10,000,000"]),
    ("out-1e12-last", _weka([_req(0), _req(1, out=10**12)]), ["request 1", "field 'out'"]),
    ("in-below-its-blocks", _weka([_req(0, **{"in": 1, "hash_ids": list(range(30))})]),
     ["request 0", "field 'hash_ids'", "30 ids of 64-token blocks"]),
    ("id-5mb", _weka(TWO, id="x" * 300), ["field 'id'", "at most 256"]),
    ("model-5mb", _weka([_req(0, model="m" * 300), _req(1)]), ["request 0", "field 'model'"]),
    ("session-bool-hash-id", _weka([_req(0, hash_ids=[True])]), ["field 'hash_ids'"]),
    ("requests-twice", _weka(TWO)[:-1] + ', "requests": []}', ["'requests' given twice"]),
    ("block-size-twice", '{"block_size": 64, ' + _weka(TWO)[1:],
     ["'block_size' given twice"]),
    ("key-twice-in-a-request", _weka(TWO).replace('"out": 50', '"out": 50, "out": 7', 1),
     ["request 0", "'out' given twice"]),
    ("trailing-garbage", _weka(TWO) + "garbage", ["data after the object"]),
    ("nested-100000", _weka([_req(0), {"x": "X"}]).replace(
        '"X"', "[" * 100_000 + "]" * 100_000), ["request 1", "nested deeper than 64"]),
]


@pytest.mark.parametrize(("body", "needles"), [c[1:] for c in WEKA_CASES],
                         ids=[c[0] for c in WEKA_CASES])
def test_a_hostile_cc_traces_file_is_one_line_naming_request_and_field(
        tmp_path: Path, body: str, needles: list[str]) -> None:
    path = tmp_path / "t.json"
    path.write_text(body)
    _refused("weka", path, *needles)


MOONCAKE_CASES = [
    ("int-5000-digits", _jl([_row(0)]).replace('"input_length": 2000', f'"input_length": {BIG}'),
     ["request 0 (line 1)", "4300 digits"]),
    ("nested-100000", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
     ["request 0 (line 1)", "nested deeper than 64"]),
    ("objects-nested-100000", '{"a": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001 + "\n",
     ["request 0 (line 1)", "nested deeper"]),
    ("timestamp-infinity", _jl([_row(0)]) + _jl([_row(1)]).replace('"timestamp": 1000',
                                                                  '"timestamp": Infinity'),
     ["request 1 (line 2)", "field 'timestamp'", "finite"]),
    ("timestamp-1e308", _jl([_row(0), _row(1, timestamp=1e308)]),
     ["request 1 (line 2)", "field 'timestamp'"]),
    ("timestamps-two-years-apart", _jl([_row(0), _row(1, timestamp=2 * 366 * 86_400_000)]),
     ["request 1 (line 2)", "span"]),
    ("delay-infinity", _jl([_row(0, session_id="a"), {**_row(1, session_id="a"),
                                                       "delay": "X"}]).replace('"X"', "Infinity"),
     ["request 1 (line 2)", "field 'delay'"]),
    ("key-twice", _jl([_row(0)]).replace('"output_length": 20',
                                         '"output_length": 20, "output_length": 9'),
     ["request 0 (line 1)", "'output_length' given twice"]),
    ("input-0", _jl([_row(0, input_length=0, hash_ids=[])]), ["field 'input_length'"]),
    ("output-1e12", _jl([_row(0, output_length=10**12)]), ["field 'output_length'"]),
    ("session-id-true", _jl([_row(0, session_id=True)]), ["field 'session_id'", "true"]),
    ("ids-for-another-prompt", _jl([_row(0, input_length=100, hash_ids=list(range(1000)))]),
     ["field 'hash_ids'", "1,000 ids of 512-token blocks for a prompt of 100 tokens"]),
    ("trailing-data", _jl([_row(0)]).rstrip("\n") + " x\n", ["request 0 (line 1)",
                                                              "data after the JSON"]),
]


@pytest.mark.parametrize(("body", "needles"), [c[1:] for c in MOONCAKE_CASES],
                         ids=[c[0] for c in MOONCAKE_CASES])
def test_a_hostile_mooncake_file_is_one_line_naming_request_and_field(
        tmp_path: Path, body: str, needles: list[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(body)
    _refused("mooncake", path, *needles)


@pytest.mark.parametrize("fmt", ["weka", "mooncake"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path, fmt: str) -> None:
    """A FIFO with no writer blocked `open()` forever; it is refused from its stat."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(fmt, fifo, "a FIFO, not a regular trace file")


def test_a_device_node_is_never_replaced_by_the_output(tmp_path: Path) -> None:
    """`-o /dev/null --force` as root used to rename the scenario over the device node;
    a private node stands in for it here."""
    node = tmp_path / "nulldev"
    try:
        os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    trace = tmp_path / "t.json"
    trace.write_text(_weka(TWO))
    r = CliRunner().invoke(main, ["import", "weka", str(trace), "-o", str(node), "--force"])
    assert r.exit_code == 2 and "not a regular file" in r.output, r.output
    assert not node.is_file() and node.exists()


def test_too_many_requests_are_refused_while_streaming_naming_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weka, "MAX_REQUESTS", 5)
    monkeypatch.setattr(mooncake, "MAX_REQUESTS", 5)
    w = tmp_path / "w.json"
    w.write_text(_weka([_req(i) for i in range(7)]))
    _refused("weka", w, "request 5", "more than 5 requests", "at most 5")
    m = tmp_path / "m.jsonl"
    m.write_text(_jl([_row(i) for i in range(7)]))
    _refused("mooncake", m, "request 5 (line 6)", "more than 5 requests")


def test_one_endless_element_or_line_is_refused_at_its_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 100 MB request (or a Mooncake line of a gigabyte, `/dev/zero`) is refused after
    its bound is read, not held whole nor decoded again per chunk."""
    monkeypatch.setattr(trace_stream, "MAX_ELEMENT_CHARS", 1 << 20)
    monkeypatch.setattr(trace_stream, "CHUNK", 1 << 16)
    monkeypatch.setattr(mooncake, "MAX_LINE_CHARS", 1 << 20)
    w = tmp_path / "w.json"
    w.write_text('{"block_size": 64, "requests": [{"in": 100, "out": 1, "hash_ids": ['
                 + "1," * 1_000_000 + "1]}]}")
    _refused("weka", w, "request 0", "one value longer than 1 MiB")
    m = tmp_path / "m.jsonl"
    m.write_text('{"hash_ids": [' + "1," * 1_000_000 + "1]}\n")
    _refused("mooncake", m, "request 0 (line 1)", "a line longer than 1,048,576 characters")


def test_a_replay_with_a_non_finite_wait_does_not_validate(tmp_path: Path) -> None:
    """`validate` passed `start_offset_s: .inf` (the run then waited forever)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(_jl([_row(0), _row(1)]))
    out = tmp_path / "o.yaml"
    assert CliRunner().invoke(main, ["import", "mooncake", str(trace), "-o",
                                     str(out)]).exit_code == 0
    text = out.read_text()
    assert "start_offset_s: 1.0" in text
    out.write_text(text.replace("start_offset_s: 1.0", "start_offset_s: .inf"))
    r = CliRunner().invoke(main, ["validate", str(out)])
    assert r.exit_code == 2 and "start_offset_s" in r.output, r.output


def test_a_replayed_wait_is_recorded_as_waited(tmp_path: Path) -> None:
    """A recorded wait longer than `replay.max_wait_s` is waited max_wait_s, and the row
    says so (it said `think_time_s = inf` for an infinite one)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(_jl([_row(0, session_id="a"), _row(1, session_id="a", delay=5e6)]))
    out = tmp_path / "o.yaml"
    assert CliRunner().invoke(main, ["import", "mooncake", str(trace), "-o",
                                     str(out)]).exit_code == 0
    r = CliRunner().invoke(main, ["run", str(out), "--out", str(tmp_path / "r"), "--quiet"])
    assert r.exit_code == 0, r.output
    run = Path(r.output.strip().splitlines()[-1])
    rows = [json.loads(x) for x in (run / "turns.jsonl").read_text().splitlines()]
    assert [x["think_time_s"] for x in rows] == [0.0, 600.0]


# ---------------------------------------------------------------- the bounded decoder
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{}",:0123456789.eE-+ aINfinityNa\\tu\n', max_size=60))
def test_the_bounded_decoder_raises_only_its_own_errors(text: str) -> None:
    """Whatever the text, `json_value` returns a finite, shallow, duplicate-free value
    or raises one of the errors `decode_error` words."""
    try:
        v = bounded.json_value(text)
    except (ValueError, RecursionError) as exc:
        assert bounded.decode_error(exc)
        return
    bounded.depth(v)
    assert "Infinity" not in json.dumps(v) and "NaN" not in json.dumps(v)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                 st.booleans(), st.none(), st.text(max_size=5)))
def test_field_checks_accept_exactly_their_range(v: Any) -> None:
    try:
        got = bounded.count(v, "f", "tokens", 1, 100)
        assert type(v) is int and 1 <= v <= 100 and got == v
    except bounded.FieldError as exc:
        assert "field 'f'" in str(exc)
        assert not (type(v) is int and 1 <= v <= 100)
    try:
        secs = bounded.seconds(v, "f", 1e6)
        assert 0 <= secs <= 1e6 and not isinstance(v, bool)
    except bounded.FieldError as exc:
        assert "field 'f'" in str(exc)
