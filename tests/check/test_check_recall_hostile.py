"""`endurance check URL --recall` as a conformance check (issue 38 item 3): a reply that
breaks the protocol is an error case, never scored; a lying `GET /v1/models` ends the
check in one line; `--timeout` bounds the whole check; options that cannot combine
are refused."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.check import needle, recall
from simulator.cli import main
from tests.lying_servers import (
    Reply,
    echo,
    garbage_status,
    html_200,
    json_gb,
    lying_server,
    models_ok,
    out_of_order,
    silent,
)

GRID = ["--lengths", "0.5k", "--depths", "0.5"]


def _check(url: str, *extra: str) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["check", url, "--recall", *extra])
    return r.exit_code, r.output.strip().splitlines(), time.monotonic() - t0


def test_a_conforming_server_is_scored() -> None:
    with lying_server(echo, models_ok) as url:
        rc, lines, _ = _check(url, *GRID, "--timeout", "10")
    assert rc == 0, lines
    assert "1 of 1 recalled" in "\n".join(lines)


@pytest.mark.parametrize(("reply", "needle"), [
    (out_of_order, "text/event-stream is not a Messages reply"),
    (html_200, "text/html is not a Messages reply"),
], ids=["event-stream-out-of-order", "html-200"])
def test_a_reply_that_breaks_the_protocol_is_not_scored(reply: Reply, needle: str) -> None:
    """Both used to be scored as misses (exit 0), the HTML one despite holding the word."""
    with lying_server(reply, models_ok) as url:
        rc, lines, _ = _check(url, *GRID, "--timeout", "10")
    text = "\n".join(lines)
    assert rc == 1 and "0 of 0 recalled" in text and needle in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize("models", [garbage_status, silent, json_gb],
                         ids=["garbage-status-line", "silent", "1-gb-body"])
def test_a_lying_models_route_ends_the_check_in_one_line(models: Reply) -> None:
    with lying_server(echo, models) as url:
        rc, lines, secs = _check(url, *GRID, "--timeout", "2")
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "GET /v1/models" in lines[0]
    assert secs < 10


def test_timeout_bounds_the_whole_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the default grid's 9 cases used to get its own --timeout (≥ 18 s here),
    and once it was spent the rest still built their prompts. Asserted on what was
    done, not on the wall clock (a busy CI box took 14.9 s for a 2.6 s check): one
    POST reached the server and one prompt was built; the other 8 were never started."""
    posts: list[bytes] = []

    async def counting_silent(w: asyncio.StreamWriter, body: bytes = b"") -> None:
        posts.append(body[:16])
        await silent(w, body)

    built: list[int] = []
    real_build = needle.build_case

    def counting_build(length: int, *a: Any) -> Any:
        built.append(length)
        return real_build(length, *a)

    monkeypatch.setattr(recall, "build_case", counting_build)
    with lying_server(counting_silent, models_ok) as url:
        rc, lines, secs = _check(url, "--timeout", "2")
    assert rc == 1 and "9 case(s) failed" in "\n".join(lines), lines
    assert "--timeout was spent" in lines[-1], lines
    assert len(posts) == 1 and len(built) == 1, (len(posts), built)
    assert secs < 120, f"check --recall --timeout 2 took {secs:.1f} s"   # a hang guard


@pytest.mark.parametrize(("args", "needle"), [
    (["--recall", "--against", "http://127.0.0.1:10"], "--recall and --against"),
    (["--recall", "--api", "openai-chat"], "Anthropic Messages only"),
    (["--lengths", "1m"], "--lengths: only with --recall"),
    (["--depths", "0.5", "--repeats", "2"], "--depths, --repeats: only with --recall"),
])
def test_options_that_cannot_combine_are_refused(args: list[str], needle: str) -> None:
    r = CliRunner().invoke(main, ["check", "http://127.0.0.1:9", *args])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output
