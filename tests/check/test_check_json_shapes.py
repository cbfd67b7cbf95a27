"""A lying server's JSON of the wrong shape is read as absent, never subscripted: the
check's readers take `JSONValue` and narrow it (issue 60's typed JSON)."""

from __future__ import annotations

from simulator.check.client import RawReply, listed_ids
from simulator.check.openai_checks import finish_reasons, tool_calls_of
from simulator.util.jsontypes import JSONObject, as_list, as_object


def test_wrong_shapes_read_as_absent() -> None:
    assert as_object([1, 2]) == {} and as_object("x") == {} and as_object(None) == {}
    assert as_list({"a": 1}) == [] and as_list(3) == []
    assert listed_ids([{"id": "m"}]) == []                       # a list, not an object
    assert listed_ids({"data": "m"}) == []
    assert listed_ids({"data": [{"id": "m"}, "junk", {"id": 7}]}) == ["m", 7]


def test_a_body_that_is_not_an_object_has_no_fields() -> None:
    for body in (b"[1, 2]", b"42", b"<html>", b'"text"'):
        assert RawReply(200, "application/json", body, 0.0).json_object() == {}


def test_hostile_stream_chunks_do_not_crash_the_readers() -> None:
    chunks: list[JSONObject] = [
        {"choices": "nope"},
        {"choices": [{"delta": ["not", "an", "object"]}]},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": "zero", "id": "c1",
                                                "function": ["f"]}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {
            "name": "read", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]},
    ]
    assert finish_reasons(chunks) == ["tool_calls"]
    assert tool_calls_of(chunks) == {0: {"id": "c1", "name": "read", "arguments": "{}"}}
