"""The pre-flight `GET /v1/models` under the run's limits (issue 29 item 2): a server
that accepts and then lies — never answers, trickles pings forever, sends garbage for a
status line, an endless body — ends `endurance run` in one line, exit 1, within the
scenario's limits, before any results directory exists. A server without the route
(404) or without JSON still runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.endpoints.http import preflight
from simulator.errors import RunError
from tests.conftest import small_scenario
from tests.lying_servers import (
    Reply,
    endless_body,
    garbage_status,
    lying_server,
    not_found,
    silent,
)
from tests.lying_servers import trickle as trickle_pings
from tests.reliability_twin import write_yaml

__all__ = ["Reply", "lying_server"]     # re-exported for the tests that import them here


# A short total (the trickle case waits it out); pings every 0.05 s stay under idle.
LIMITS = ["--set", "timeouts.first_byte_s=0.5", "--set", "endpoint.timeout_s=0.5",
          "--set", "timeouts.total_s=0.8", "--set", "endpoint.connect_timeout_s=1"]


@pytest.mark.parametrize(("reply", "needle"), [
    (silent, "first_byte_s=0.5"),
    (trickle_pings, "total_s=0.8"),
    (garbage_status, "not an HTTP reply"),
    (endless_body, "more than"),
], ids=["silent", "trickle-pings", "garbage-status-line", "endless-body"])
def test_a_lying_models_route_ends_the_run_in_one_line(tmp_path: Path, reply: Reply,
                                                       needle: str) -> None:
    path = write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))
    with lying_server(reply) as url:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", url, "--out",
                                      str(tmp_path / "r"), "--quiet", *LIMITS])
        elapsed = time.monotonic() - t0
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "GET /v1/models" in lines[0] and needle in lines[0], lines[0]
    assert "no results directory" in lines[0]
    assert elapsed < 60.0, elapsed      # the limits (≤ 2 s), not the 600 s default
    assert not (tmp_path / "r").exists()


def test_the_models_body_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "MODELS_BODY_LIMIT", 256 * 1024)
    with lying_server(endless_body) as url, pytest.raises(RunError, match="more than"):
        preflight.preflight(url, 1.0)


def test_a_server_without_the_route_lists_no_models() -> None:
    with lying_server(not_found) as url:
        preflight.preflight(url, 1.0)              # no error
        assert preflight.models(url, 1.0) == []


def test_nothing_listening_is_unreachable() -> None:
    with lying_server(silent) as url:
        pass                                       # stopped: the port is closed now
    with pytest.raises(RunError, match="unreachable"):
        preflight.preflight(url, 1.0)


@pytest.mark.parametrize(("reply", "needle"), [
    (silent, "no response head within 1 s (timeouts.preflight_s)"),
    (trickle_pings, "did not finish within 2 s (2 × timeouts.preflight_s)"),
], ids=["silent", "trickle-pings"])
def test_the_pre_flight_is_bounded_by_its_own_limit_with_default_limits(
        tmp_path: Path, reply: Reply, needle: str) -> None:
    """With no limits set, a silent or trickling /v1/models held the run 600 s (the
    attempt's first_byte_s) or 3,600 s (total_s); the pre-flight has its own bound,
    `timeouts.preflight_s` for the head (default 30 s; 1 s here), twice that in all."""
    path = write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))
    with lying_server(reply) as url:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["run", str(path), "--endpoint", url, "--out",
                                      str(tmp_path / "r"), "--quiet",
                                      "--set", "timeouts.preflight_s=1"])
        elapsed = time.monotonic() - t0
    lines = r.output.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1 and needle in lines[0], r.output
    assert elapsed < 60.0, elapsed      # the limits (≤ 2 s), not the 600 s default


def test_the_pre_flight_default_is_seconds() -> None:
    from simulator.scenario.model import Timeouts
    assert Timeouts().preflight_s == preflight.PREFLIGHT_S == 30.0
