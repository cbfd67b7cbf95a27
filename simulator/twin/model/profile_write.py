"""A hardware profile with fitted efficiency terms: the base card's YAML with the fit's
terms and a source note saying what was fitted, on what, and when. Pure (dict in, dict
out); `yaml_text` renders it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import yaml

from simulator.twin.model.profiles import Efficiency, HardwareProfile


def fitted_hardware(base: Mapping[str, object], terms: Mapping[str, float], free: Iterable[str],
                    *, name: str, source: str, description: str | None = None,
                    updates: Mapping[str, object] | None = None) -> dict[str, object]:
    """`base` (a hardware profile as loaded from YAML) renamed `name`, its efficiency
    replaced by `terms` (5 significant digits); `source` says how they were obtained and
    names the fitted ones (`free`; the rest are the base's priors). `updates` replaces
    top-level fields (with their own `sources` entries). Validated before it is returned."""
    free = list(free)
    out = {k: v for k, v in base.items() if k != "efficiency"}
    out["name"] = name
    if description is not None:
        out["description"] = description
    for key, value in (updates or {}).items():
        if key == "sources":
            prev = out.get("sources", {})
            out["sources"] = {**(prev if isinstance(prev, Mapping) else {}),
                              **(value if isinstance(value, Mapping) else {})}
        else:
            out[key] = value
    eff: dict[str, object] = {k: float(f"{v:.5g}") for k, v in terms.items()
                              if k in Efficiency.model_fields and k != "source"}
    eff["source"] = (f"{source}; fitted: {', '.join(free) or 'none'}; "
                     f"the other terms are {base.get('name', 'the base')}'s priors")
    out["efficiency"] = eff
    HardwareProfile.model_validate(out)
    return out


def yaml_text(profile: Mapping[str, object], header: str = "") -> str:
    """The profile as YAML, in its keys' order, after an optional comment header."""
    head = "".join(f"# {line}\n" for line in header.splitlines())
    return head + yaml.safe_dump(dict(profile), sort_keys=False, width=100)
