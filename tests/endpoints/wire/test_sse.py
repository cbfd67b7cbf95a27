"""The shared SSE parser and event accumulator (pure, no sockets)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.endpoints.base import ErrorType, Usage
from simulator.endpoints.wire.anthropic import StreamState
from simulator.endpoints.wire.http_errors import hint_headers, parse_retry_after
from simulator.endpoints.wire.sse import SSEParser, StreamFault, loads_event, parse_block
from simulator.session.conversation import TextBlock


def _ev(name: str, body: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


def _delta(i: int, text: str) -> bytes:
    return _ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                       "delta": {"type": "text_delta", "text": text}})


PRELUDE = b"".join([
    _ev("message_start", {"type": "message_start", "message": {"usage": {}}}),
    _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                "content_block": {"type": "text", "text": ""}}),
])

STREAM = b"".join([
    _ev("message_start", {"type": "message_start", "message": {
        "usage": {"input_tokens": 5, "output_tokens": 1, "cache_creation_input_tokens": 2}}}),
    _ev("content_block_start", {"type": "content_block_start", "index": 0,
                                "content_block": {"type": "text", "text": ""}}),
    b": keep-alive comment\n\n",
    *(_delta(0, t) for t in ["a", "b\n", "c ✓"]),
    _ev("content_block_start", {"type": "content_block_start", "index": 1,
                                "content_block": {"type": "thinking", "thinking": ""}}),
    _ev("content_block_delta", {"type": "content_block_delta", "index": 1,
                                "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
    _ev("future_event", {"type": "future_event"}),
    _ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                          "usage": {"output_tokens": 4, "input_tokens": 6}}),
    _ev("message_stop", {"type": "message_stop"}),
])


def _run(chunks: list[bytes]) -> StreamState:
    state = StreamState(0.0)
    for i, c in enumerate(chunks):
        state.feed_bytes(c, float(i + 1))
    state.end_of_body(float(len(chunks) + 1))
    return state


def _check(state: StreamState) -> None:
    resp = state.response(99.0)
    assert resp.content == (TextBlock("ab\nc ✓"),)  # thinking is not kept
    assert resp.stop_reason == "end_turn"
    assert resp.usage == Usage(6, 4, None, 2)  # later wins; missing stays None
    assert resp.timing.n_deltas == 4 and len(resp.extra["token_times"]) == 4
    assert resp.output_tokens_est == 4


def test_whole_stream_in_one_chunk_shares_one_timestamp() -> None:
    state = _run([STREAM])
    _check(state)
    assert state.first == state.last == 1.0


# where each event ends: cuts there give reads that are exactly one event (the paced
# case, which `feed_bytes` takes without the general parser)
EVENT_ENDS = [i + 2 for i in range(len(STREAM)) if STREAM[i:i + 2] == b"\n\n"][:-1]


def test_one_event_per_read() -> None:
    bounds = [0, *EVENT_ENDS, len(STREAM)]
    state = _run([STREAM[a:b] for a, b in itertools.pairwise(bounds)])
    _check(state)
    assert len(set(state.times.tolist())) == 4   # every delta has its own read time


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(1, len(STREAM) - 1), st.sampled_from(EVENT_ENDS)),
                max_size=12), st.booleans())
def test_any_chunking_and_crlf_gives_the_same_reply(cuts: list[int], crlf: bool) -> None:
    data = STREAM.replace(b"\n", b"\r\n") if crlf else STREAM
    if crlf:  # the same cut points, moved to where they fall in the CRLF text
        cuts = [c + STREAM[:c].count(b"\n") for c in cuts]
    bounds = [0, *sorted(c % len(data) for c in cuts), len(data)]
    state = _run([data[a:b] for a, b in itertools.pairwise(bounds)])
    _check(state)
    assert state.times.tolist() == sorted(state.times.tolist())


def test_a_final_event_without_its_blank_line_counts_at_end_of_body() -> None:
    cut = STREAM[:-2]  # message_stop's closing blank line never came
    state = StreamState(0.0)
    state.feed_bytes(cut, 1.0)
    assert not state.stopped
    state.end_of_body(2.0)
    _check(state)


def test_data_only_framing_is_understood() -> None:
    blocks = [blk.split(b"data: ", 1)[1] for blk in STREAM.split(b"\n\n") if b"data: " in blk]
    _check(_run([b"".join(b"data: " + b + b"\n\n" for b in blocks)]))


def test_parse_block_follows_field_rules() -> None:
    assert parse_block(b"event:x\ndata: 1\ndata:2\nid: 7") == ("x", b"1\n2")
    assert parse_block(b": only a comment") == ("", b"")


def _field_rules(block: bytes) -> tuple[str, bytes]:
    """The WHATWG field rules line by line: parse_block's oracle."""
    name, data = "", []
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue
        field, _, value = line.partition(b":")
        value = value[1:] if value[:1] == b" " else value
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)
    return name, b"\n".join(data)


@given(st.one_of(
    st.lists(st.sampled_from([b"event: ", b"event:", b"data: ", b"data:", b"\n", b":", b" ",
                              b"x", b"id: 1", b"\xff", b"{}"]), max_size=12).map(b"".join),
    st.builds(lambda a, b: b"event: " + a + b"\ndata: " + b,   # the common two-line form
              st.binary(max_size=6), st.binary(max_size=6))))
@settings(max_examples=300)
def test_parse_block_equals_the_field_rules(block: bytes) -> None:
    assert parse_block(block) == _field_rules(block)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4),
                                                                         c, max_size=3),
                     max_leaves=8)


@given(st.one_of(
    _JSON.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.tuples(_JSON, st.sampled_from(["", " ", "\n", " x", "}", "\t\r"]), st.integers(0, 3))
    .map(lambda t: (json.dumps(t[0])[t[2]:] + t[1]).encode()),
    st.binary(max_size=12).map(lambda b: b"{" + b), st.binary(max_size=12).map(lambda b: b'"' + b)))
@settings(max_examples=400)
def test_loads_event_equals_json_loads(data: bytes) -> None:
    try:
        expected = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        with pytest.raises(StreamFault):
            loads_event(data, "x")
        return
    assert loads_event(data, "x") == expected


def test_missing_message_stop_is_a_disconnect() -> None:
    state = _run([STREAM.rsplit(b"event: message_stop", 1)[0]])
    with pytest.raises(StreamFault) as info:
        state.response(1.0)
    assert info.value.error_type is ErrorType.DISCONNECT
    assert state.partial_output_tokens() == 4


@pytest.mark.parametrize(("etype", "expected"), [("overloaded_error", ErrorType.OVERLOADED),
                                                 ("api_error", ErrorType.STREAM_ERROR)])
def test_error_event_raises_after_counting_earlier_deltas(etype: str,
                                                          expected: ErrorType) -> None:
    data = PRELUDE + _delta(0, "x") + _ev("error", {"type": "error", "error": {"type": etype}})
    state = StreamState(0.0)
    with pytest.raises(StreamFault) as info:
        state.feed_blocks(SSEParser().feed(data), 1.0)
    assert info.value.error_type is expected
    assert state.n_deltas == 1


@pytest.mark.parametrize("bad", [b"event: message_start\ndata: {nope\n\n",
                                 b"event: content_block_delta\ndata: {nope\n\n"])
def test_bad_json_is_malformed(bad: bytes) -> None:
    state = StreamState(0.0)
    with pytest.raises(StreamFault) as info:
        state.feed_blocks(SSEParser().feed(bad + _ev("message_stop", {})), 1.0)
        state.response(2.0)
    assert info.value.error_type is ErrorType.MALFORMED


def test_tool_use_with_bad_json_input_is_malformed() -> None:
    state = StreamState(0.0)
    state.on_event("message_start", {})
    state.on_event("content_block_start", {"index": 0, "content_block": {
        "type": "tool_use", "id": "t", "name": "Bash"}})
    state.add_delta(0, "input_json_delta", '{"cmd": ', 1.0)
    state.on_event("message_stop", {})
    with pytest.raises(StreamFault):
        state.response(2.0)
    assert state.partial_output_tokens() == 1  # falls back to the delta count


def test_hint_headers() -> None:
    assert hint_headers({"turn_kind": "edit"}) == {"x-endurance-turn-kind": "edit"}


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "7"}, 7.0), ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after": "Thu, 01 Jan 1970 00:00:30 GMT"}, 20.0), ({"retry-after": "soon"}, None),
    ({}, None)])
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers.get, now_epoch=10.0) == expected


@pytest.mark.parametrize("sep", [(",", ":"), (", ", ": ")])
def test_fast_path_keeps_escapes_exact(sep: tuple[str, str]) -> None:
    pieces = ['a"b', "\\c", "é✓\n", "\t}}", ""]
    tool = ['{"q": "x\\"y"', "}"]

    def ev(name: str, body: dict[str, object]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(body, separators=sep)}\n\n".encode()

    data = b"".join([
        ev("message_start", {"type": "message_start", "message": {}}),
        ev("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
        *(ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": t}})
          for t in pieces),
        ev("content_block_start", {"type": "content_block_start", "index": 1,
                                   "content_block": {"type": "tool_use", "id": "t",
                                                     "name": "Grep"}}),
        *(ev("content_block_delta", {"type": "content_block_delta", "index": 1,
                                     "delta": {"type": "input_json_delta", "partial_json": p}})
          for p in tool),
        ev("message_stop", {"type": "message_stop"})])
    resp = _run([data]).response(2.0)
    assert resp.text == "".join(pieces)
    assert resp.content[1].to_api()["input"] == {"q": 'x"y'}
    assert resp.timing.n_deltas == len(pieces) + len(tool)
