"""The HTTP twin against hostile request bodies (issue 15 item 6): 400 with a message for
anything that is not a usable Messages request, 413 past the body limit, large bodies
parsed off the event loop; the server keeps serving afterwards."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from simulator.twin.serve import server
from tests.twin.serve.test_twin_server import body, make_app

HOSTILE: list[tuple[str, bytes]] = [
    ("deep-list", b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("deep-object", b'{"a": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"}"),
    ("not-json", b"<html>hello</html>"),
    ("not-utf8", b'{"model": "\xff\xfe"}'),
    ("array", b"[1, 2, 3]"),
    ("null", b"null"),
    ("messages-number", json.dumps({"model": "m", "max_tokens": 5, "messages": 5}).encode()),
    ("content-object", json.dumps({"model": "m", "max_tokens": 5,
                                   "messages": [{"role": "user", "content": {"x": 1}}]}).encode()),
    ("blocks-strings", json.dumps({"model": "m", "max_tokens": 5,
                                   "messages": [{"role": "user", "content": ["a", 1, None]}]}).encode()),
    ("system-number", json.dumps({"model": "m", "max_tokens": 5, "system": 7,
                                  "messages": [{"role": "user", "content": "hi"}]}).encode()),
    ("tools-garbage", json.dumps({"model": "m", "max_tokens": 5, "tools": [1, "x", None],
                                  "messages": [{"role": "user", "content": "hi"}]}).encode()),
    ("max-tokens-bool", json.dumps({"model": "m", "max_tokens": True,
                                    "messages": [{"role": "user", "content": "hi"}]}).encode()),
    ("max-tokens-inf", b'{"model": "m", "max_tokens": 1e999, "messages": []}'),
    ("nan", b'{"model": "m", "max_tokens": NaN, "messages": []}'),
]


@pytest.fixture
async def base(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setattr(server, "MAX_BODY_BYTES", 2 * 2**20)
    async with server.serving(make_app()) as url:
        yield url


async def _post(url: str, data: bytes, path: str = "/v1/messages") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(
            url + path, data=io.BytesIO(data), headers={"content-type": "application/json"}) as r:
        return r.status, await r.json(content_type=None)


@pytest.mark.parametrize("data", [d for _, d in HOSTILE], ids=[i for i, _ in HOSTILE])
async def test_hostile_bodies_get_400_with_a_message(base: str, data: bytes) -> None:
    paths = ["/v1/messages"] + ([] if b"max_tokens\": true" in data else
                                ["/v1/messages/count_tokens"])  # counting needs no max_tokens
    for path in paths:
        status, reply = await _post(base, data, path)
        assert status == 400, (path, reply)
        assert reply["type"] == "error" and reply["error"]["type"] == "invalid_request_error"
        assert reply["error"]["message"]
    ok, _ = await _post(base, json.dumps(body(stream=False)).encode())
    assert ok == 200                                  # still serving


async def test_a_body_past_the_limit_gets_413(base: str) -> None:
    status, reply = await _post(base, b'{"x": "' + b"a" * (3 * 2**20) + b'"}')
    assert status == 413 and reply["error"]["type"] == "request_too_large"


async def test_large_bodies_are_parsed_off_the_loop(base: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = asyncio.to_thread

    async def spy(fn: Any, *args: Any) -> Any:
        calls.append(fn)
        return await real(fn, *args)

    monkeypatch.setattr(server.asyncio, "to_thread", spy)
    big = body(user="word " * (server.OFFLOAD_BYTES // 4), stream=False, max_tokens=5)
    status, _ = await _post(base, json.dumps(big).encode(), "/v1/messages/count_tokens")
    assert status == 200 and calls == [json.loads]
