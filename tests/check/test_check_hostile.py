"""`endurance check` against lying servers (issue 29 item 3): `--timeout` bounds the
whole check's wall time (a complete stream on a connection that never closes, an
HTTP/1.0 reply with no length, a content-length larger than the body), and a 1 GB
body is refused at 16 MiB, not read into memory."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import pytest
from click.testing import CliRunner

from simulator.check import client as check_client
from simulator.check.runner import run_check_async
from simulator.cli import main
from tests.endpoints.http.test_endpoints_limits import SSE_HEAD, _chunk
from tests.endpoints.http.test_endpoints_lying import COMPLETE, HEAD_10
from tests.lying_servers import Reply, lying_server, models_ok
from tests.lying_servers import json_gb as one_gb_json


async def complete_no_close(w: asyncio.StreamWriter) -> None:
    w.write(SSE_HEAD + _chunk(COMPLETE["anthropic"]))


async def http10_no_length(w: asyncio.StreamWriter) -> None:
    w.write(HEAD_10 + COMPLETE["anthropic"])


async def length_larger(w: asyncio.StreamWriter) -> None:
    body = b'{"data": [{"id": "m"}]}'
    w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body) * 10).encode() + b"\r\n\r\n" + body)


@pytest.mark.parametrize("models", [pytest.param(None, marks=pytest.mark.slow), models_ok],
                         ids=["all-lie", "models-answer"])
@pytest.mark.parametrize("reply", [complete_no_close, http10_no_length, length_larger],
                         ids=["complete-no-close", "http10-no-length", "length-too-large"])
def test_check_timeout_bounds_the_whole_check(reply: Reply, models: Reply | None) -> None:
    """Each of the ~8 requests used to wait its own --timeout (66 s for --timeout 10;
    16 s and more for --timeout 2): the whole check now ends within about one (the
    bound leaves a loaded machine room, issue 38 item 7)."""
    with lying_server(reply, models) as url:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["check", url, "--timeout", "2"])
        elapsed = time.monotonic() - t0
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    assert elapsed < 10.0, f"check --timeout 2 took {elapsed:.1f} s"


async def test_a_1gb_json_body_is_refused_in_bounded_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_client, "MAX_BODY_BYTES", 2 * 2**20)   # keep the test quick
    with lying_server(one_gb_json) as url:
        tracemalloc.start()
        try:
            report = await run_check_async(url, timeout_s=5, wall_s=5)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    reachable = report.results[0]
    assert reachable.name == "reachable" and "larger than" in reachable.reason
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
