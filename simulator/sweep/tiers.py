"""Searches repeated over an outer dimension: one size search per host KV tier size
(`size --kv-offload-gib 0,64`) or per output-speed tier (`size --tier 30`), as
`Outer` dimensions of the one pipeline.

Two things are called a tier here and are kept apart by name: a *KV tier* is the twin's
host memory for offloaded KV cache (GiB), a *speed tier* an output-speed floor each
request must get (tok/s, with a TTFT bound, for a share of the requests). `EachValue`
runs a search once per value of a dimension, one after another, each in its own
subfolder with its own overrides, so every answer is the one that search gives alone.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from simulator.analysis.goodput import DEFAULT_TTFT_S
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import Slo
from simulator.analysis.tier_sizing import knee, tier_set
from simulator.errors import InputError
from simulator.scenario.model import GoodputSpec, RampTier
from simulator.sweep.pipeline import Profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import Outer, PointBase
from simulator.util.bounded import json_file

V = TypeVar("V")
A = TypeVar("A")

JsonRow = dict[str, object]

KV_TIERS_FILE = "size-kv-tiers.json"          # a table of searches per host KV tier size
SPEED_TIERS_FILE = "size-speed-tiers.json"    # a table of searches per output-speed tier
OLD_TIERS_FILE = "size-tiers.json"            # either table, before the two were named


@dataclass(frozen=True, slots=True)
class SpeedTier:
    """An output-speed tier: requests get ≥ `floor_tok_s` decode tok/s with TTFT ≤
    `ttft_s`, for at least `attainment` of them in the steady window, beside the
    `--slo`s (`slos`)."""

    floor_tok_s: float
    ttft_s: float
    attainment: float
    slos: tuple[Slo, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.floor_tok_s:g} tok/s"

    def judged(self) -> list[str]:
        """The SLOs a run at this tier is judged on (the goodput share first)."""
        return [f"window_goodput_share>={self.attainment:g}", *(str(s) for s in self.slos)]

    def overrides(self) -> tuple[str, ...]:
        """The per-request SLO the run's goodput counts."""
        return (f"goodput.ttft_s={self.ttft_s}", f"goodput.output_tok_s={self.floor_tok_s}")

    def ramp_tier(self) -> RampTier:
        return RampTier(name=self.name, slos=self.judged(),
                        goodput=GoodputSpec(ttft_s=self.ttft_s, output_tok_s=self.floor_tok_s))


def speed_tiers_for(slos: Sequence[Slo], floors: Sequence[float], ttft_s: float | None,
                attainment: float) -> tuple[SpeedTier, ...]:
    """`size --tier F …` as speed tiers, the loosest first (duplicates once)."""
    ttft = DEFAULT_TTFT_S if ttft_s is None else ttft_s
    return tuple(SpeedTier(f, ttft, attainment, tuple(slos)) for f in sorted(set(floors)))


def ramp_tiers(slos: Sequence[Slo], speed: Sequence[SpeedTier]) -> list[RampTier]:
    """The tiers a ramp's steps are judged against: the `--slo`s as one tier, or each
    speed tier (with the `--slo`s), the loosest first."""
    if not speed:
        return [RampTier(name="SLOs", slos=[str(s) for s in slos])]
    return [t.ramp_tier() for t in speed]


def kv_tiers_dim(gibs: Sequence[float]) -> Outer[float]:
    """Host KV tier sizes (GiB): `tier-<G>gib/`, `twin.kv_offload_gib=G`."""
    return Outer("kv_offload_gib", tuple(gibs), lambda g: f"tier-{g:g}gib",
                 lambda g: (tier_set(g),), lambda g: f"host KV tier {g:g} GiB")


def speed_tiers_dim(tiers: Sequence[SpeedTier]) -> Outer[SpeedTier]:
    """Output-speed tiers: `tier-<F>/`, goodput counted under the tier's SLO."""
    return Outer("tier", tuple(tiers), lambda t: f"tier-{t.floor_tok_s:g}",
                 lambda t: t.overrides(), lambda t: t.name)


@dataclass
class EachValue(Generic[V, A]):
    """`search(base, value)` once per value of `dim`, one after another (see the
    module); `on_answer(value, answer)` hears each as it ends."""

    base: PointBase
    dim: Outer[V]
    search: Callable[[PointBase, V], Profile[A]]
    on_answer: Callable[[V, A], None] | None = None

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], list[tuple[V, A]]]:
        answers: list[tuple[V, A]] = []
        for v in self.dim.values:
            sub = self.base.under(self.dim.sub(v), self.dim.overrides(v))
            answer = yield from self.search(sub, v).plan(width)
            if self.on_answer is not None:
                self.on_answer(v, answer)
            answers.append((v, answer))
        return answers


def _price(result: SizingResult) -> float | None:
    """The card's $/h as the probes' runs state it (the first that does)."""
    for p in result.probes:
        price = p.summary.get("price_per_hour")
        if isinstance(price, int | float) and price:
            return price
    return None


@dataclass
class KvTierTable:
    """One size search per host KV tier size, under one compaction `policy`."""

    policy: str
    answers: list[tuple[float, SizingResult]] = field(default_factory=list)

    def rows(self) -> list[JsonRow]:
        return [{"kv_offload_gib": gib, "policy": self.policy, **r.to_dict()}
                for gib, r in self.answers]

    def to_dict(self) -> dict[str, object]:
        """size-kv-tiers.json: the rows and the knee (the smallest tier within 5% of
        the best answer)."""
        rows = [{"kv_offload_gib": gib, "sessions": r.sessions} for gib, r in self.answers]
        return {"rows": self.rows(), "knee_gib": knee(rows)}

    @property
    def any_answer(self) -> bool:
        return any(r.sessions > 0 for _, r in self.answers)


@dataclass
class SpeedTierTable:
    """One size search per output-speed tier."""

    answers: list[tuple[SpeedTier, SizingResult]] = field(default_factory=list)

    def rows(self) -> list[JsonRow]:
        return [{"tier": t.name, "ttft_s": t.ttft_s, "output_tok_s": t.floor_tok_s,
                 "slos": t.judged(), "price_per_hour": _price(r), **r.to_dict()}
                for t, r in self.answers]

    def to_dict(self) -> dict[str, object]:
        """size-speed-tiers.json."""
        return {"rows": self.rows()}

    @property
    def any_answer(self) -> bool:
        return any(r.sessions > 0 for _, r in self.answers)


def read_tier_table(folder: Path) -> tuple[str, list[JsonRow]] | None:
    """("kv" | "speed", rows) of a size folder's tier table: today's files, or the
    `size-tiers.json` runs before them wrote (either table, told apart by its rows);
    None when the folder has none. One InputError line for a file that is no table."""
    for name, kind in ((KV_TIERS_FILE, "kv"), (SPEED_TIERS_FILE, "speed"),
                       (OLD_TIERS_FILE, "")):
        path = folder / name
        if not path.is_file():
            continue
        data = json_file(path, what="tier table")
        rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError(f"{path}: not a tier table (no list of rows)")
        if not kind:
            kind = "kv" if "knee_gib" in data or any("kv_offload_gib" in r for r in rows) \
                else "speed"
        return kind, rows
    return None
