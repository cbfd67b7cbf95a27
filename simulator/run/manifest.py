"""A run's manifest: what ran, against what, with which versions, written first (the
typed model and its reader: `records.manifest`).

`manifest.json` is the first file of a results directory: the resolved scenario (so a
resume or a re-run needs no scenario file), the endpoint's description (URL redacted),
simulated or not, the price the cost figures use, and the package versions.
"""

from __future__ import annotations

import dataclasses
import platform
import re
import secrets
import time
from collections.abc import Mapping

from simulator import __version__
from simulator.endpoints.base import Endpoint
from simulator.records.manifest import Manifest, parse_manifest
from simulator.run.spec import RunSpec
from simulator.scenario.load import scenario_hash
from simulator.scenario.model import Scenario
from simulator.twin.core.sampling import SamplingParams
from simulator.twin.serve import sampling_wire
from simulator.util.numbers import to_float
from simulator.util.redact import redact_url


def versions() -> dict[str, str]:
    """Versions from package metadata (importing the SDK just for this costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    out = {"endurance": __version__, "python": platform.python_version(),
           "platform": platform.platform()}
    for pkg in ("anthropic", "openai", "pandas", "aiohttp"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def new_run_id(name: str, label: str | None = None) -> str:
    """`<time>-<scenario>[-<label>]-<4 hex>`: a labelled run's folder carries its label
    (`run --label block` → `results/…-claude-code-endurance-block-1a2b`), its characters
    outside `[A-Za-z0-9_.-]` folded to `-` and cut to 40, so any label makes a safe name."""
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "-", label or "").strip("-.")[:40].strip("-.")
    return (f"{time.strftime('%Y%m%d-%H%M%S')}-{name}{'-' + tag if tag else ''}"
            f"-{secrets.token_hex(2)}")


def price_per_hour(spec: RunSpec, endpoint: Endpoint) -> float | None:
    """$/hour for the cost figures: the command's, else the twin hardware's rental price."""
    if spec.price_per_hour is not None:
        return spec.price_per_hour
    if endpoint.simulated:
        profile = endpoint.describe().get("profile", {})
        hw = profile.get("hardware", {}) if isinstance(profile, dict) else {}
        price = hw.get("usd_per_hour") if isinstance(hw, dict) else None
        return to_float(price) if price is not None else None
    return None


def sampling_manifest(s: Scenario, endpoint: Endpoint,
                      http_twin: Mapping[str, object] | None = None) -> dict[str, object]:
    """What the run's requests sample with: the fields the scenario sends, and where
    the rest come from. A twin, in-process or over HTTP (its `/v1/models` states its
    defaults), states every value it resolved (the model profile's generation config, as
    vLLM's `--generation-config auto` applies it, under the fields sent); a server
    applies its own defaults, unknown here."""
    temperature, fields = s.wire_sampling()
    sent: dict[str, float | int] = dict(fields)
    if temperature is not None:
        sent = {"temperature": temperature, **sent}
    out: dict[str, object] = {"sent": sent}
    defaults = getattr(endpoint, "sampling_defaults", None)
    stated = (http_twin or {}).get("sampling_defaults")
    if defaults is None and isinstance(stated, Mapping):
        try:
            defaults = sampling_wire.resolve(
                {k: sampling_wire.check(k, v) for k, v in stated.items()
                 if k in sampling_wire.CHAT_FIELDS}, sampling_wire.defaults_of(None))
        except ValueError:
            defaults = None          # a twin of another version: say nothing resolved
    if isinstance(defaults, SamplingParams):
        resolved = sampling_wire.resolve(sent, defaults)
        out["resolved"] = dataclasses.asdict(resolved)
        out["unset_from"] = ("the model profile's generation_config (vLLM --generation-config "
                             "auto), else vLLM's neutral values")
    else:
        out["resolved"] = None
        out["unset_from"] = ("the server's defaults (vLLM: the model's generation_config.json "
                             "with --generation-config auto, its default)")
    return out


def build_manifest(s: Scenario, resolved: Mapping[str, object], spec: RunSpec,
                   endpoint: Endpoint, run_id: str,
                   http_twin: Mapping[str, object] | None = None) -> Manifest:
    """The manifest a new run opens with (`records.manifest.Manifest`: the recorder,
    the server's facts and the finish add theirs)."""
    desc = endpoint.describe()
    return parse_manifest({
        "run_id": run_id, "label": spec.label, "scenario": s.name,
        "scenario_file": str(spec.scenario_path), "scenario_hash": scenario_hash(
            {k: v for k, v in resolved.items() if k != "base_dir"}),
        "scenario_resolved": {k: v for k, v in resolved.items() if k != "base_dir"},
        "overrides": list(spec.overrides), "seed": s.seed, "sessions": s.sessions,
        "turns": s.turns, "compaction": s.compaction.kind,
        # constant load / warm start (warm-start turns: runner.warm_start_turn(seed, i, turns))
        "load": s.load.model_dump(),
        "sampling": sampling_manifest(s, endpoint, http_twin),
        "endpoint": {**desc, **({"url": redact_url(spec.endpoint_url)} if spec.endpoint_url else {})},
        "simulated": endpoint.simulated, "price_per_hour": price_per_hour(spec, endpoint),
        "contains_verbatim_content": s.contains_verbatim_content,
        "versions": versions(), "scenario_base_dir": resolved.get("base_dir"),
        "run_spec": {"endpoint_url": redact_url(spec.endpoint_url) if spec.endpoint_url
                     else None, "twin": spec.twin, "spec": spec.spec, "client": spec.client,
                     "stop_grace_s": spec.stop_grace_s},
    }, "the run's manifest")
