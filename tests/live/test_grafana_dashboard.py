"""The Grafana dashboard in the repo (docs/grafana/endurance-vllm.json) plots series that
exist: every `endurance:` name is one the exporter writes, every `vllm:` name one the
HTTP twin's /metrics (vLLM's names) serves, every `DCGM_` name one the scraper reads.
Grafana itself does not run here (docs/watching.md says so)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client import generate_latest

from simulator.live.exporter import RunMetrics
from simulator.records.prometheus import DIALECTS
from simulator.records.rows import TurnRecord
from tests.http_twin import twin_in_thread
from tests.live.test_exporter_follow import samples

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "endurance-vllm.json"
NAME = re.compile(r"\b((?:endurance|vllm):[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)")
HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")


def _exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["panels"]
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def _families(text: str) -> set[str]:
    names = {name for name, _ in samples(text)}
    return names | {n[: -len(s)] for n in names for s in HISTOGRAM_PARTS if n.endswith(s)}


def test_every_series_the_dashboard_plots_exists() -> None:
    used = {m for e in _exprs() for m in NAME.findall(e)}
    assert any(n.startswith("endurance:") for n in used)
    assert any(n.startswith("vllm:") for n in used)
    m = RunMetrics("r", "s")
    m.observe(TurnRecord("r", "s0000", 0, "turn", 1, 0.0, 0.0, 2000, 100, 10, "t", 0.0,
                         output_tokens=5, ttft_s=0.1, e2e_s=0.5, prompt_tokens=2000,
                         cache_read_tokens=100, compaction="block").to_row())
    m.observe(TurnRecord("r", "s0000", 0, "probe", 1, 0.0, 0.0, 2000, 100, 10, "t", 0.0,
                         probe_correct=True).to_row())
    m.set_gauges(1, 1)
    ours = _families(generate_latest(m.registry).decode())
    with twin_in_thread(time_scale=50.0) as url, \
            urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        vllm = _families(r.read().decode())
    dcgm = set(DIALECTS["dcgm"])
    for name in sorted(used):
        base = next((name[: -len(s)] for s in HISTOGRAM_PARTS if name.endswith(s)), name)
        known = ours if name.startswith("endurance:") else vllm \
            if name.startswith("vllm:") else dcgm
        assert name in known or base in known, name
