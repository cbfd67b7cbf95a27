"""Fault injection: each kind on the wire as clients see it from real servers/proxies."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import anthropic
import httpx2
import pytest

from simulator.errors import InputError
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import StepShape
from simulator.twin.serve.faults import FaultInjector, FaultKind, parse_faults
from simulator.twin.serve.server import ServerConfig, create_app, serving


class FakePerf:
    """10 ms per step plus 10 µs per token (engine seconds)."""

    block_size = 16

    def step_time(self, shape: StepShape) -> float:
        return 0.01 + 1e-5 * shape.num_tokens

    def kv_capacity_tokens(self) -> int:
        return 200_000


def app(faults: str = "", time_scale: float = 1000.0, cutoff_s: float | None = None) -> Any:
    cfg = ServerConfig(model="m", hardware="a40", context_window=32_768,
                       time_scale=time_scale, faults=parse_faults(faults), cutoff_s=cutoff_s)
    return create_app(TwinEngine(FakePerf()), cfg)


BODY: dict[str, Any] = {"model": "m", "max_tokens": 40, "stream": True,
                        "system": "You write code. " * 100,
                        "messages": [{"role": "user", "content": "fix the bug"}]}


def test_parse_faults_and_errors() -> None:
    spec = parse_faults("429:0.03,529:0.03,500:0.02,disconnect:0.02,stall:0.01:7,spike:0.1:2")
    assert dict(spec.probabilities)[FaultKind.RATE_LIMIT] == 0.03
    assert spec.stall_s == 7 and spec.spike_s == 2 and spec.enabled
    assert not parse_faults("").enabled
    for bad, msg in (("teapot:0.1", "unknown fault kind"), ("429:0.6,500:0.6", "sum"),
                     ("429:x", "not a number"), ("429:2", "within"), ("429:0.1:3", "KIND")):
        with pytest.raises(InputError, match=msg):
            parse_faults(bad)


def test_injector_is_seeded_and_follows_probabilities() -> None:
    spec = parse_faults("429:0.2,disconnect:0.1")
    a, b = FaultInjector(spec, seed=3), FaultInjector(spec, seed=3)
    draws = [a.draw(100) for _ in range(5000)]
    assert draws[:50] == [b.draw(100) for _ in range(50)]
    counts = Counter(d.kind for d in draws)
    assert 900 < counts[FaultKind.RATE_LIMIT] < 1100
    assert 400 < counts[FaultKind.DISCONNECT] < 600
    assert all(1 <= d.after_tokens <= 64 for d in draws)
    assert a.injected[FaultKind.RATE_LIMIT] == counts[FaultKind.RATE_LIMIT]


@pytest.mark.parametrize(("spec", "status", "kind"), [
    ("429:1", 429, "rate_limit_error"), ("529:1", 529, "overloaded_error"),
    ("500:1", 500, "api_error")])
async def test_error_statuses(spec: str, status: int, kind: str) -> None:
    async with serving(app(spec)) as url, httpx2.AsyncClient(base_url=url) as c:
        r = await c.post("/v1/messages", json=BODY)
        metrics = (await c.get("/metrics")).text
    assert r.status_code == status
    assert r.json() == {"type": "error", "error": {"type": kind, "message": r.json()["error"]
                                                   ["message"]}}
    assert (r.headers.get("retry-after") == "1") == (status == 429)
    assert f'endurance_twin_faults_injected_total{{kind="{status}"}} 1.0' in metrics


async def test_sdk_sees_rate_limit() -> None:
    async with serving(app("429:1")) as url:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.RateLimitError):
            await client.messages.create(model="m", max_tokens=5, stream=True,
                                         messages=[{"role": "user", "content": "hi"}])
        await client.close()


async def test_disconnect_mid_stream() -> None:
    async with serving(app("disconnect:1")) as url, httpx2.AsyncClient(base_url=url) as c:
        got = b""
        with pytest.raises(httpx2.RemoteProtocolError):
            async with c.stream("POST", "/v1/messages", json=BODY) as r:
                assert r.status_code == 200
                async for chunk in r.aiter_bytes():
                    got += chunk
        assert b"event: message_start" in got and b"message_stop" not in got
        assert (await c.get("/health")).status_code == 200   # the server lives on


async def test_error_event_after_200() -> None:
    async with serving(app("error_event:1")) as url, httpx2.AsyncClient(base_url=url) as c:
        r = await c.post("/v1/messages", json=BODY)
    assert r.status_code == 200
    last = r.text.strip().split("\n\n")[-1].split("\n")
    assert last[0] == "event: error"
    assert json.loads(last[1][6:])["error"]["type"] == "overloaded_error"
    assert "message_stop" not in r.text


async def test_error_event_through_sdk() -> None:
    async with serving(app("error_event:1")) as url:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
        stream = await client.messages.create(model="m", max_tokens=40, stream=True,
                                              messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
            async for _ in stream:
                pass
        await client.close()


async def test_malformed_event() -> None:
    async with serving(app("malformed:1")) as url, httpx2.AsyncClient(base_url=url) as c:
        r = await c.post("/v1/messages", json=BODY)
    last = r.text.strip().split("\n\n")[-1].split("\n")
    assert r.status_code == 200 and last[0] == "event: content_block_delta"
    with pytest.raises(json.JSONDecodeError):
        json.loads(last[1][6:])


async def test_stall_trips_client_read_timeout() -> None:
    async with serving(app("stall:1:30")) as url, httpx2.AsyncClient(
            base_url=url, timeout=httpx2.Timeout(5.0, read=0.2)) as c:
        got = b""
        with pytest.raises(httpx2.ReadTimeout):
            async with c.stream("POST", "/v1/messages", json=BODY) as r:
                async for chunk in r.aiter_bytes():
                    got += chunk
        assert b"content_block_delta" in got and b"message_stop" not in got


async def test_spike_delays_first_token() -> None:
    async with serving(app("spike:1:0.2")) as url, httpx2.AsyncClient(base_url=url) as c:
        t0 = time.monotonic()
        r = await c.post("/v1/messages", json=BODY)
        assert time.monotonic() - t0 >= 0.2 and "message_stop" in r.text


async def test_cutoff_524_before_first_byte() -> None:
    # 0.1× real time: the prefill step alone takes ~0.1 s wall, beyond the 0.05 s cut-off.
    async with serving(app(time_scale=0.1, cutoff_s=0.05)) as url, \
            httpx2.AsyncClient(base_url=url) as c:
        r = await c.post("/v1/messages", json=BODY)
    assert r.status_code == 524 and r.text == "error code: 524"


async def test_cutoff_drops_a_started_stream() -> None:
    # Real time: 40 decode steps of 10 ms outlast a 0.15 s cut-off.
    async with serving(app(time_scale=1.0, cutoff_s=0.15)) as url, \
            httpx2.AsyncClient(base_url=url) as c:
        got = b""
        with pytest.raises(httpx2.RemoteProtocolError):
            async with c.stream("POST", "/v1/messages", json=BODY) as r:
                async for chunk in r.aiter_bytes():
                    got += chunk
        assert b"content_block_delta" in got and b"message_stop" not in got
