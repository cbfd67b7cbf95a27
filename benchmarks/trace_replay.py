"""Import cc-traces files and replay them on the in-process twin: per file the request
count, the replayed prompt size error per request, and the hash-implied vs the
twin's server cache-read share; with `--what-if`, one trace as recorded, under
block and under summarize (aggregate tok/s, reuse, compactions).

    python -m benchmarks.trace_replay TRACE.json ... [--what-if TRACE.json]

Timing is off (`replay.timing=none`: no think/tool waits) so a long trace replays in
seconds; every figure printed is measured by the run it names.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.cli.importer import trace_yaml
from simulator.importers.trace_import import import_weka
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario


def replay(scenario: Path, out: Path, overrides: list[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    res = execute(RunSpec(str(scenario), ["replay.timing=none", *overrides], out_dir=out,
                          show_progress=False), echo=lambda _: None)
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    summary = json.loads((res.run_dir / "summary.json").read_text())
    return df[(df.request_kind == "turn") & df.ok], {"status": res.status, **summary}


def one(trace: Path, tmp: Path) -> dict[str, Any]:
    path = tmp / f"{trace.stem}.yaml"
    imp = import_weka([trace], out_path=path)
    path.write_text(trace_yaml(imp.data, "cc-traces"))
    s, _ = load_scenario(path, [])
    assert s.replay is not None
    df, summ = replay(path, tmp / "runs", [])
    errs: list[float] = []
    for i, script in enumerate(s.replay.sessions):
        got = df[df.session_id == f"s{i:04d}"].sort_values("turn_index").prompt_tokens.to_numpy()
        rec = np.array([c.usage.prompt_tokens for c in script.calls if c.usage])
        if len(got) == len(rec):
            errs.extend((np.abs(got - rec) / rec).tolist())
    return {"trace": trace.name, "requests": imp.summary["requests"],
            "subagents": imp.summary["subagents"], "max_in": imp.summary["prompt_tokens_max"],
            "drops": imp.summary["drops"], "replayed": len(df), "status": summ["status"],
            "size_err_median": float(np.median(errs)) if errs else None,
            "size_err_max": float(np.max(errs)) if errs else None,
            "implied_share": imp.summary["implied_cache_read_share"],
            "replayed_share": float(df.cache_read_tokens.sum() / df.prompt_tokens.sum())}


def what_if(trace: Path, tmp: Path) -> list[dict[str, Any]]:
    path = tmp / f"whatif-{trace.stem}.yaml"
    imp = import_weka([trace], out_path=path)
    path.write_text(trace_yaml(imp.data, "cc-traces"))
    peak = imp.summary["prompt_tokens_max"]
    hi, lo = int(peak * 0.6), int(peak * 0.35)
    rows = []
    for label, ov in [("as recorded", []),
                      ("block", ["compaction.kind=block", f"compaction.high_water_tokens={hi}",
                                 f"compaction.low_water_tokens={lo}"]),
                      ("summarize", ["compaction.kind=summarize",
                                     f"compaction.threshold_tokens={hi}"])]:
        df, s = replay(path, tmp / "runs", ov)
        rows.append({"policy": label, "status": s["status"], "requests": len(df),
                     "aggregate_tok_s": s["aggregate_tok_s"],
                     "server_cache_read_share": s["server_cache_read_share"],
                     "compactions": s["compaction_events"],
                     "prompt_tokens_total": int(df.prompt_tokens.sum()),
                     "context_max": int(df.prompt_tokens.max())})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--what-if", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for t in a.traces:
            print(json.dumps(one(t, Path(d))), flush=True)
        if a.what_if is not None:
            for row in what_if(a.what_if, Path(d)):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
