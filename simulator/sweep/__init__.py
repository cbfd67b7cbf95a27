"""Many runs: one point runner, one fan-out, and the profiles that choose the next point
(sweeps, sizing searches, calibration and fit points).

The searches as library calls (`sweep.size`, `sweep.ramp`, `sweep.kv_tiers`,
`sweep.speed_tiers`, `sweep.fleet`, `sweep.pd`, `sweep.team`, `sweep.points`) live in
`sweep.api`; `sweep.search(sweep.SizeRequest(...))` is `endurance size` in one call,
the request refused as the command refuses it (`sweep.request`, `sweep.size_search`).
They are loaded on first use, so importing one module of this package (the fan-out,
the point runner) does not load them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.sweep.api import (
        SizeAnswer,
        fleet,
        kv_tiers,
        pd,
        points,
        ramp,
        search_base,
        size,
        speed_tiers,
        sweep_kind,
        team,
    )
    from simulator.sweep.request import SizeRequest
    from simulator.sweep.size_search import prepare, search
    from simulator.sweep.tiers import SpeedTier, speed_tiers_for

__all__ = ["SizeAnswer", "SizeRequest", "SpeedTier", "fleet", "kv_tiers", "pd", "points",
           "prepare", "ramp", "search", "search_base", "size", "speed_tiers",
           "speed_tiers_for", "sweep_kind", "team"]


def __getattr__(name: str) -> object:
    """`sweep.size` and the other entry points, imported when first asked for."""
    if name in ("SpeedTier", "speed_tiers_for"):
        # deferred: the searches load pandas and the run layer; the fan-out alone does not
        from simulator.sweep import tiers
        return getattr(tiers, name)
    if name == "SizeRequest":
        # deferred: as above
        from simulator.sweep import request
        return request.SizeRequest
    if name in ("prepare", "search"):
        # deferred: as above
        from simulator.sweep import size_search
        return getattr(size_search, name)
    if name in __all__:
        # deferred: as above
        from simulator.sweep import api
        return getattr(api, name)
    raise AttributeError(f"module 'simulator.sweep' has no attribute {name!r}")
