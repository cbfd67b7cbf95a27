"""`twin fit FILE...`: the files a fit reads, gathered into one set of points — points
files (YAML/CSV, `twin.model.fit.load_points`) and the benchmark files users already
have (`vllm bench serve --save-result`, AIPerf's profile export, GuideLLM's benchmarks
JSON: `importers.bench_results`), read as points of kind "bench"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from simulator.errors import InputError

if TYPE_CHECKING:      # imported when a fit runs: `twin --help` stays light
    from simulator.twin.model.fit import Observation

# What a fit of benchmark points alone frees by default: the per-step cost (TPOT at low
# concurrency), weight streaming (decode) and GEMM efficiency (prefill, so TTFT); the
# points files' default (`DEFAULT_FREE`) adds terms a benchmark does not constrain
# (reserve_bytes, kv_half_seqs).
BENCH_FREE = ("t0_s", "eta_w", "eta_c")


@dataclass
class FitInputs:
    points: list[Observation] = field(default_factory=list)
    hardware: str | None = None
    model: str | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    fit: list[str] | None = None
    sources: list[str] = field(default_factory=list)     # "file (tool, model)" per file
    only_bench: bool = True


def gather(files: Sequence[Path], vllm_version: str | None = None) -> FitInputs:
    """Every file's points; a points file's hardware, model, engine settings and `fit`
    are taken from the first that states them (two that disagree: one InputError)."""
    from simulator.importers.bench_results import bench_points, read_bench_file
    from simulator.twin.model.fit import Observation, load_points
    out = FitInputs()
    if not files:
        raise InputError("twin fit: give a points file or benchmark result files")
    for f in files:
        if f.suffix.lower() == ".json":
            results = read_bench_file(f, vllm_version=vllm_version)
            points = []
            for i, d in enumerate(bench_points(results)):
                try:
                    points.append(Observation.model_validate(d))
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(x) for x in err["loc"]) or d["metric"]
                    msg = str(err["msg"]).removeprefix("Value error, ")
                    raise InputError(f"{f}: point {i + 1} ({d['label']}): {loc}: {msg}") \
                        from None
            out.points.extend(points)
            models = sorted({r.model for r in results if r.model})
            out.sources.append(f"{f.name} ({results[0].tool}"
                               + (f", {', '.join(models)}" if models else "") + ")")
            continue
        pf = load_points(f)
        out.points.extend(pf.points)
        out.only_bench = out.only_bench and all(p.kind == "bench" for p in pf.points)
        for key in ("hardware", "model"):
            value = getattr(pf, key)
            if value and getattr(out, key) and value != getattr(out, key):
                raise InputError(f"{f}: {key} {value!r}, but an earlier file says "
                                 f"{getattr(out, key)!r}")
            setattr(out, key, getattr(out, key) or value)
        if pf.engine:
            if out.engine and pf.engine != out.engine:
                raise InputError(f"{f}: engine settings differ from an earlier file's")
            out.engine = dict(pf.engine)
        out.fit = out.fit or pf.fit
        out.sources.append(f"{f.name} ({pf.source or 'points file'})")
    return out
