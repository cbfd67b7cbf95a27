"""What a run measured, in one line, from its manifest: the hardware, model and
quantisation (or the endpoint), simulated or not, and the scenario.

Every summary a person reads — the run summary, `size`, the sizing report — starts with
this line, so a figure is never read without knowing what produced it (a what-if such as
`--twin h100/llama-3.1-70b:awq` otherwise looks like the default A40 run).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from simulator.errors import InputError
from simulator.records.manifest import EndpointFacts, Manifest, read_manifest


def describe_target(manifest: Manifest) -> str:
    """'hardware h100 (NVIDIA H100 …), model llama-3.1-70b, quantization awq — SIMULATED
    (in-process twin); scenario claude-code-endurance' or the real endpoint's URL and model."""
    ep = manifest.endpoint
    scenario = f"scenario {_or(manifest.scenario)}"
    kind = ep.kind
    if kind in ("twin-inprocess", "twin-fleet", "twin-pd"):
        desc = f" ({ep.hardware_description})" if ep.hardware_description else ""
        name = ep.model_name or _or(ep.model).split(":")[0]
        what = {"twin-fleet": f"in-process twin, {_or(ep.replicas)} replicas behind "
                              f"{_or(ep.router)}",
                "twin-pd": f"in-process twin, P/D {_or(ep.prefill)} prefill : "
                           f"{_or(ep.decode)} decode"}.get(str(kind), "in-process twin")
        return (f"hardware {_or(ep.hardware)}{desc}, model {name}, quantization "
                f"{_or(ep.quantization)} — SIMULATED ({what}){estimate_note(ep)}; {scenario}")
    if manifest.http_twin:
        scale = "?" if manifest.time_scale is None else manifest.time_scale
        return (f"hardware {_or(manifest.http_twin_hardware)}, model "
                f"{_or(manifest.http_twin_model)} — SIMULATED (HTTP twin at {_or(ep.url)}, "
                f"time scale {scale}); {scenario}")
    resolved = manifest.scenario_resolved
    model = None if resolved is None else resolved.model
    return (f"real endpoint {_or(ep.url)}, model {_or(model)} "
            f"(hardware and quantization as the server runs them); {scenario}")


ESTIMATE = "estimate: "     # `twin.model.profiles.ESTIMATE`: a label of borrowed terms


def estimate_note(ep: EndpointFacts) -> str:
    """', ESTIMATE: terms borrowed from …' when the twin runs on terms fitted on another
    card or kernel family (its calibration source's first clause), else ''."""
    src = ep.calibration_source or ""
    if not src.startswith(ESTIMATE):
        return ""
    head = src[len(ESTIMATE):].split(" (", 1)[0].split(";", 1)[0]
    return f", ESTIMATE: {head}"


def _or(v: str | None) -> str:
    return "?" if v is None else v


def target_of_runs(run_dirs: Iterable[str | Path]) -> str | None:
    """`describe_target` of the first readable run among `run_dirs` (a sweep's or a size
    search's points share their target); None when none can be read."""
    for d in run_dirs:
        try:
            return describe_target(read_manifest(Path(d)))
        except (InputError, OSError, ValueError):
            continue
    return None
