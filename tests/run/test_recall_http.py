"""Recall probes against the HTTP twin (both wire protocols): the server answers from
the prompt it received over the wire, so recall = retention there too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_scenario, turns_of
from tests.http_twin import twin_server

RECALL = ROOT / "scenarios" / "claude-code-recall.yaml"
FAST = ["think_time_s=0", *(f"turn_templates.{i}.tool.latency_s=0" for i in range(5))]
SMALL = ["turns=50", "compaction.kind=summarize", "compaction.threshold_tokens=9000",
         "probes.every_turns=10"]


@pytest.mark.slow
@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
def test_probes_over_http(tmp_path: Path, api: str) -> None:
    with twin_server(time_scale=2000.0) as url:
        res = run_scenario(RECALL, tmp_path, [*SMALL, *FAST, f"endpoint.api={api}"],
                           endpoint_url=url)
    assert res.status == "completed", res.outcome.reason
    df = turns_of(res)
    p = df[df["request_kind"] == "probe"]
    assert len(p) > 0 and p["ok"].all()
    assert (p["probe_correct"].astype(bool) == (p["fact_retained"] != "dropped")).all()
    assert set(p["fact_retained"]) >= {"verbatim", "dropped", "summary"}
    assert res.summary["ok_turns"] == 50
