"""What a run measured, in one line, from its manifest: the hardware, model and
quantisation (or the endpoint), simulated or not, and the scenario.

Every summary a person reads — the run summary, `size`, the sizing report — starts with
this line, so a figure is never read without knowing what produced it (a what-if such as
`--twin h100/llama-3.1-70b:awq` otherwise looks like the default A40 run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from simulator.analysis.load import load_manifest
from simulator.errors import InputError


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def describe_target(manifest: Mapping[str, Any]) -> str:
    """'hardware h100 (NVIDIA H100 …), model llama-3.1-70b, quantization awq — SIMULATED
    (in-process twin); scenario claude-code-endurance' or the real endpoint's URL and model."""
    ep = _dict(manifest.get("endpoint"))
    profile = _dict(ep.get("profile"))
    hw, model = _dict(profile.get("hardware")), _dict(profile.get("model"))
    http_twin = _dict(manifest.get("http_twin"))
    scenario = f"scenario {manifest.get('scenario', '?')}"
    kind = ep.get("kind")
    if kind in ("twin-inprocess", "twin-fleet", "twin-pd"):
        desc = f" ({hw['description']})" if hw.get("description") else ""
        name = str(model.get("name") or str(ep.get("model", "?")).split(":")[0])
        what = {"twin-fleet": f"in-process twin, {ep.get('replicas', '?')} replicas behind "
                              f"{ep.get('router', '?')}",
                "twin-pd": f"in-process twin, P/D {ep.get('prefill', '?')} prefill : "
                           f"{ep.get('decode', '?')} decode"}.get(str(kind), "in-process twin")
        return (f"hardware {ep.get('hardware', '?')}{desc}, model {name}, quantization "
                f"{model.get('quantization', '?')} — SIMULATED ({what}); {scenario}")
    resolved = _dict(manifest.get("scenario_resolved"))
    if http_twin:
        return (f"hardware {http_twin.get('hardware', '?')}, model {http_twin.get('model', '?')}"
                f" — SIMULATED (HTTP twin at {ep.get('url', '?')}, time scale "
                f"{manifest.get('time_scale', '?')}); {scenario}")
    return (f"real endpoint {ep.get('url', '?')}, model {resolved.get('model', '?')} "
            f"(hardware and quantization as the server runs them); {scenario}")


def target_of_runs(run_dirs: Iterable[str | Path]) -> str | None:
    """`describe_target` of the first readable run among `run_dirs` (a sweep's or a size
    search's points share their target); None when none can be read."""
    for d in run_dirs:
        try:
            return describe_target(load_manifest(Path(d)))
        except (InputError, OSError, ValueError):
            continue
    return None
