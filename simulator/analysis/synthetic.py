"""Synthetic runs for tests and notebooks: turns tables with the TurnRecord columns.

A seeded toy model of a session: context grows each turn, a block compaction drops it
back every `compaction_every` turns, and the turn right after a compaction is slowed
by `post_compaction_slowdown` (a cold prefix cache). Not a simulation of a server —
the twin does that — just known shapes for checking the analysis maths and plots.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.records.rows import COLUMNS, TurnRecord


def synthetic_turns(*, sessions: int = 1, turns: int = 60, tok_s: float = 100.0,
                    compaction_every: int = 20, post_compaction_slowdown: float = 3.0,
                    noise: float = 0.05, seed: int = 0, run_id: str = "synthetic",
                    compaction_kind: str = "block") -> pd.DataFrame:
    """A turns table (one successful request per turn) with known throughput shape."""
    rng = np.random.default_rng(seed)
    rows: list[TurnRecord] = []
    for s in range(sessions):
        t, ctx = 0.0, 2500
        for i in range(turns):
            compacted = compaction_every > 0 and i > 0 and i % compaction_every == 0
            removed = ctx - 2500 if compacted else 0
            ctx -= removed
            speed = tok_s * (1.0 + noise * rng.standard_normal())
            speed /= post_compaction_slowdown if compacted else 1.0
            out = 700
            e2e = out / speed
            ttft = 0.2 + ctx / 20000.0 + (2.0 if compacted else 0.0)
            rec = TurnRecord(
                run_id=run_id, session_id=f"s{s:03d}", turn_index=i, request_kind="turn",
                attempt=1, started_at=1.7e9 + t, started_mono_s=t, context_tokens_est=ctx,
                reusable_prefix_tokens=1500 if compacted else max(ctx - 800, 0),
                max_tokens=4096, turn_kind="edit", think_time_s=1.0,
                input_tokens=ctx // 10, cache_read_tokens=ctx - ctx // 10,
                cache_creation_tokens=0, prompt_tokens=ctx, output_tokens=out,
                output_tokens_est=out, ttft_s=ttft, decode_tok_s=speed * 1.1,
                turn_tok_s=out / e2e, e2e_s=e2e, stop_reason="end_turn",
                compaction=compaction_kind if compacted else None,
                compaction_messages_removed=32 if compacted else 0,
                compaction_tokens_removed=removed,
            )
            rows.append(rec)
            t += e2e + 1.0
            ctx += 1200
    return pd.DataFrame([r.to_row() for r in rows], columns=list(COLUMNS))


def write_run_dir(run_dir: Path, turns: pd.DataFrame, *, simulated: bool = True,
                  scenario_hash: str = "h0", seed: int = 0, label: str = "",
                  price_per_hour: float | None = 0.44, compaction_kind: str = "block",
                  server_metrics: pd.DataFrame | None = None) -> Path:
    """Write a minimal results directory (turns.parquet, manifest.json) for tests, with
    the manifest keys `endurance run` writes. Runs with the same `scenario_hash` and
    seed replay the same workload (compaction may differ)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    turns.to_parquet(run_dir / "turns.parquet", index=False)
    if server_metrics is not None:
        server_metrics.to_parquet(run_dir / "server_metrics.parquet", index=False)
    resolved = {"name": "synthetic", "workload": scenario_hash, "seed": seed,
                "compaction": {"kind": compaction_kind}}
    endpoint = ({"kind": "twin-inprocess", "hardware": "a40", "model": "qwen3-coder-30b-a3b"}
                if simulated else {"kind": "messages-api", "url": "http://127.0.0.1:8000"})
    manifest = {
        "run_id": run_dir.name, "label": label or run_dir.name, "scenario": "synthetic",
        "scenario_hash": f"{scenario_hash}-{compaction_kind}", "scenario_resolved": resolved,
        "overrides": [], "seed": seed, "endpoint": endpoint, "simulated": simulated,
        "price_per_hour": price_per_hour, "status": "completed",
        "started_at": 1.7e9, "ended_at": 1.7e9 + 600,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run_dir
