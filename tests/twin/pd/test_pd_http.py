"""`endurance twin serve --pd P:D`: prefill and decode instances behind one URL."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import SCENARIOS, run_scenario, turns_of
from tests.http_twin import twin_server

TEAM = SCENARIOS / "claude-code-team.yaml"
SMALL = ["sessions=3", "turns=3", "arrival.interval_s=0.5", "think_time_s.median=0.5"]


def _per_replica(url: str, name: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {s.labels["replica"]: s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if s.name == name}


@pytest.mark.slow
def test_a_pd_fleet_behind_one_url_prefills_remotely_and_decodes(tmp_path: Path) -> None:
    with twin_server("--hardware", "h100", "--pd", "1:2", time_scale=2000.0) as url:
        res = run_scenario(TEAM, tmp_path, SMALL, endpoint_url=url)
        prompts = _per_replica(url, "vllm:prompt_tokens_total")
        generated = _per_replica(url, "vllm:generation_tokens_total")
    assert res.status == "completed", res.outcome.reason
    df = turns_of(res)
    assert df.ok.all() and res.manifest.simulated is True
    # replicas 0, 1 decode; 2 is the prefill instance: it prefilled the sessions' first
    # ~20k prompts (one sampled token each), the decode instances produced the replies
    assert set(prompts) == {"0", "1", "2"}
    assert prompts["2"] >= 20_000 and 1 <= generated["2"] < len(df)
    assert generated["0"] + generated["1"] > 10 * generated["2"]


def test_twin_serve_refuses_a_bad_split_in_one_line() -> None:
    from click.testing import CliRunner

    from simulator.cli import main
    for args in (["--pd", "0:1"], ["--pd", "1:1", "--replicas", "2"],
                 ["--pd", "1:1", "--kv-link", "infiniband"]):
        res = CliRunner().invoke(main, ["twin", "serve", "--port", "0", *args])
        lines = [x for x in res.output.splitlines() if x.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and "error" in lines[0], res.output
