"""`--reset-prefix-cache` against lying servers (issue 38 item 2): only a reset's own
answer counts as a reset — garbage, an HTML page, a body past 64 KiB or a trickle
that never ends is one line (RunError), within the reset's whole-exchange bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from simulator.endpoints.http.cache_reset import reset_prefix_cache
from simulator.errors import InputError, RunError
from tests.lying_servers import (
    Reply,
    garbage_status,
    html_200,
    json_gb,
    lying_server,
    not_found,
    reset_refused,
    silent,
    trickle,
)


async def empty_200(w: asyncio.StreamWriter) -> None:
    """vLLM's answer: 200 with no body."""
    w.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")


async def success(w: asyncio.StreamWriter) -> None:
    body = b'{"success": true}'
    w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


@pytest.mark.parametrize("reply", [empty_200, success], ids=["vllm-empty-200", "twin-json"])
def test_a_reset_is_reported_when_the_server_answers_one(reply: Reply) -> None:
    with lying_server(reply) as url:
        assert reset_prefix_cache(url, timeout_s=5).startswith("prefix cache reset: ")


@pytest.mark.parametrize(("reply", "error", "needle"), [
    (garbage_status, RunError, "not an HTTP reply"),
    (html_200, RunError, "text/html, not a prefix-cache reset's JSON"),
    (json_gb, RunError, "over 64 KiB"),
    (trickle, RunError, "no complete answer within 1 s"),
    (silent, RunError, "no complete answer within 1 s"),
    (reset_refused, RunError, "refused the reset"),
    (not_found, InputError, "has no prefix-cache reset"),
], ids=["garbage", "html-200", "1-gb-body", "trickle", "silent", "refused", "404"])
def test_a_lying_server_is_never_reported_reset(reply: Reply, error: type[Exception],
                                                needle: str) -> None:
    with lying_server(reply) as url:
        t0 = time.monotonic()
        with pytest.raises(error, match="--reset-prefix-cache") as info:
            reset_prefix_cache(url, timeout_s=1)
        assert time.monotonic() - t0 < 10      # the 1 s bound; a trickle never ended
    assert needle in str(info.value) and "\n" not in str(info.value)
