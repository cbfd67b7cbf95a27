"""The sweeps as profiles of the one pipeline: which points, and the rows they make.

A sweep is a grid. Its inner kind decides the rows: session counts (`Counts`), several
speculation settings (`Specs`), several values of one scenario setting with seeds
(`Settings`: speed beside recall) or copy shares × settings (`Copy`: where speculation
pays). Outer dimensions — host KV tier sizes, fleet sizes — repeat the inner sweep in a
subfolder per value and tag its rows (`Outer`). Every point is an ordinary run through
`point.run_point`; a profile yields its whole grid at once and the fan-out runs as many
at a time as it may. Rows carry every figure of their run under summary.json's names
(`analysis.sizing.sweep_row`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from simulator.analysis.copy_sweep import copy_overrides, copy_rows
from simulator.analysis.load import load_run
from simulator.analysis.policy_sweep import mark_frontier, point_row
from simulator.analysis.sizing import sweep_row
from simulator.errors import InputError, RunError
from simulator.scenario.load import ScenarioSource, load_scenario, resolve_scenario
from simulator.scenario.model import Scenario, StepRamp
from simulator.sweep.pipeline import Plan
from simulator.sweep.point import Point, PointResult, Target
from simulator.twin.spec_decode.ngram import parse_spec

V = TypeVar("V")


@dataclass(frozen=True)
class PointBase:
    """What every point of one search shares: the scenario and its overrides, where it
    runs, and the folder its runs go to. `base_seed` is the scenario's seed (repeats run
    seed + k)."""

    scenario_path: str
    overrides: tuple[str, ...]
    folder: Path
    base_seed: int
    target: Target = field(default_factory=Target)
    reuse: bool = False               # notebooks: read a matching completed twin run
    # the scenario file read once (`search_base`), every point's overrides resolved on it
    source: ScenarioSource | None = None

    def point(self, sessions: int | None, *, extra: Sequence[str] = (), seed_offset: int = 0,
              sub: str | None = None, spec: str | None = None, label: str | None = None,
              coords: Mapping[str, object] | None = None,
              ramp: StepRamp | None = None) -> Point:
        """A point of this search: `sessions` (None: the scenario's), `extra` overrides,
        the seed + `seed_offset`, runs under `folder/sub`."""
        over = [*self.overrides, *extra]
        if sessions is not None:
            over.append(f"sessions={sessions}")
        if seed_offset:
            over.append(f"seed={self.base_seed + seed_offset}")
        text = label or ((f"{sessions} sessions" if sessions is not None else "the scenario")
                         + (f" (seed +{seed_offset})" if seed_offset else ""))
        target = self.target if spec is None else replace(self.target, spec=spec)
        return Point(self.scenario_path, tuple(over),
                     str(self.folder / sub if sub else self.folder), text, target,
                     reuse=self.reuse, cost=float(sessions or 1), coords=dict(coords or {}),
                     ramp=ramp, source=self.source)

    def resolve(self, extra: Sequence[str] = ()) -> tuple[Scenario, dict[str, Any]]:
        """The scenario with the base's overrides and `extra`: resolved on the source
        read once, else loaded from the file."""
        over = [*self.overrides, *extra]
        return resolve_scenario(self.source, over) if self.source is not None \
            else load_scenario(self.scenario_path, over)

    def top_keys(self) -> set[str] | None:
        """The resolved scenario's top-level keys, from the source and the overrides'
        paths without resolving (a team day's resolve copies and validates it whole);
        None without a source."""
        if self.source is None:
            return None
        return {*self.source.data, *(o.split("=", 1)[0].strip().split(".")[0]
                                      for o in self.overrides)}

    def under(self, sub: str, extra: Sequence[str] = ()) -> PointBase:
        """The same search in `folder/sub` with `extra` overrides (an outer dimension)."""
        return replace(self, folder=self.folder / sub, overrides=(*self.overrides, *extra))


def raise_first_failure(results: Sequence[PointResult], what: Callable[[Point], str]) -> None:
    """The first failed point, in the order the points were given, as the error a
    serial run stops with (a serial batch cut short ends on its failure)."""
    for r in results:
        r.raise_error(what(r.point))


def safe_name(value: str) -> str:
    """A folder name for a swept value."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", value) or "value"


@dataclass
class SweepAnswer:
    """The rows of a sweep and how they are shown: `name` its kind (`sweep`,
    `spec-sweep`, …: how it is rendered); `sections` one table (and plot) per outer
    value; `stem` the JSON file's stem (`sweep-tiers` for a session-count sweep per
    host KV tier, else the name)."""

    name: str
    rows: list[dict[str, Any]]
    sections: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    stem: str = ""

    def __post_init__(self) -> None:
        self.stem = self.stem or self.name


# ---------------------------------------------------------------------------- inner --
@dataclass(frozen=True)
class Counts:
    """The scenario at each session count: one row per count."""

    counts: tuple[int, ...]
    name = "sweep"

    def plan(self, base: PointBase, width: int) -> Plan:
        points = [base.point(n, coords={"requested_sessions": n}) for n in self.counts]
        results = yield points
        raise_first_failure(results, lambda p: f"at {p.coords['requested_sessions']} sessions")
        return [{**sweep_row(r.point.coords, r.summary), "run_dirs": [r.run_dir]}
                for r in results]


@dataclass(frozen=True)
class Specs:
    """Each speculation setting at each session count: one row per (setting, count)."""

    specs: tuple[str, ...]
    counts: tuple[int, ...]
    name = "spec-sweep"

    def plan(self, base: PointBase, width: int) -> Plan:
        points = [base.point(n, sub=s.replace(":", "-"), spec=s,
                             coords={"spec": s, "requested_sessions": n})
                  for s in self.specs for n in self.counts]
        results = yield points
        raise_first_failure(results, lambda p: f"with --spec {p.coords['spec']} at "
                                               f"{p.coords['requested_sessions']} sessions")
        return [{**sweep_row(r.point.coords, r.summary), "run_dirs": [r.run_dir]}
                for r in results]


@dataclass(frozen=True)
class Settings:
    """One scenario setting at several values, `repeats` seeds each, at one session
    count: one row per value, speed over the seeds beside recall pooled over them."""

    key: str
    values: tuple[str, ...]
    sessions: int
    repeats: int
    name = "policy-sweep"

    def plan(self, base: PointBase, width: int) -> Plan:
        points = [base.point(self.sessions, extra=(f"{self.key}={v}",), seed_offset=k,
                             sub=safe_name(v), coords={self.key: v, "seed_offset": k})
                  for v in self.values for k in range(self.repeats)]
        results = yield points
        rows = []
        for v in self.values:
            done = [r for r in results if r.point.coords[self.key] == v]
            for r in done:
                if r.status == "error":
                    r.raise_error("")
            failed = [r for r in done if r.status == "failed"]
            if failed:
                raise RunError(f"the run with {self.key}={v} failed: {failed[0].reason} "
                               f"({failed[0].run_dir})")
            turns = [load_run(Path(r.run_dir))[1] for r in done]
            row = point_row(self.key, v, [dict(r.summary) for r in done], turns)
            rows.append(row | {"requested_sessions": self.sessions,
                               "run_dirs": [r.run_dir for r in done]})
        return mark_frontier(rows)


@dataclass(frozen=True)
class Copy:
    """Copy shares × speculation settings × session counts × seeds: where speculation
    pays, by how much the replies copy their context."""

    levels: tuple[float, ...]
    specs: tuple[str, ...]
    counts: tuple[int, ...]
    repeats: int
    code_edit: tuple[bool, ...]          # which turn templates edit code (copy their context)
    name = "copy-sweep"

    def plan(self, base: PointBase, width: int) -> Plan:
        sets = {lv: copy_overrides(self.code_edit, lv) for lv in self.levels}
        jobs = [(lv, sp, n, k) for lv in self.levels for sp in self.specs
                for n in self.counts for k in range(self.repeats)]
        points = [base.point(n, extra=sets[lv], seed_offset=k, spec=sp,
                             sub=f"copy-{lv:g}/{sp.replace(':', '-')}",
                             coords={"copy": lv, "spec": sp, "requested_sessions": n,
                                     "seed_offset": k})
                  for lv, sp, n, k in jobs]
        results = yield points
        raise_first_failure(results, lambda p: f"at copy {p.coords['copy']:g}, "
                                               f"{p.coords['spec']}, "
                                               f"{p.coords['requested_sessions']} sessions")
        figures = {job: r.summary for job, r in zip(jobs, results, strict=True)}
        rows = copy_rows(figures, list(self.levels), list(self.specs), list(self.counts),
                         self.repeats)
        dirs = {job: r.run_dir for job, r in zip(jobs, results, strict=True)}
        for row in rows:
            row["run_dirs"] = [dirs[j] for j in jobs if j[0] == row["copy"]
                               and j[2] == row["requested_sessions"]
                               and j[1] in (row["spec"], row["baseline"])]
        return rows


Inner = Counts | Specs | Settings | Copy


# ---------------------------------------------------------------------------- outer --
@dataclass(frozen=True)
class Outer(Generic[V]):
    """An outer dimension: the inner sweep (or search, `tiers.EachValue`) once per
    value, in its own subfolder with its own overrides, rows tagged with the value."""

    key: str                              # the rows' tag: kv_offload_gib | replicas | …
    values: tuple[V, ...]
    sub: Callable[[V], str]
    overrides: Callable[[V], tuple[str, ...]]
    title: Callable[[V], str]
    tags: Callable[[V], Mapping[str, object]] = lambda v: {}


# a sweep's outer dimensions: host KV tier sizes (GiB), fleet sizes, P:D splits
SweepDim = Outer[float] | Outer[int] | Outer[str]


def replicas_dim(sizes: Sequence[int], router: str) -> Outer[int]:
    return Outer("replicas", tuple(sizes), lambda r: f"replicas-{r}",
                 lambda r: (f"fleet.replicas={r}",),
                 lambda r: f"{r} replica(s) behind {router}", lambda r: {"router": router})


def pd_dim(splits: Sequence[tuple[int, int]]) -> Outer[str]:
    """P:D splits of the twin (`--pd 1:1,1:2`): P prefill + D decode instances each."""
    return Outer("pd", tuple(f"{p}:{d}" for p, d in splits),
                 lambda v: "pd-{}p{}d".format(*v.split(":")),
                 lambda v: ("fleet.prefill={}".format(v.split(":")[0]),
                            "fleet.replicas={}".format(v.split(":")[1])),
                 lambda v: f"P/D {v} (prefill:decode)",
                 lambda v: {"prefill": int(v.split(":")[0]),
                            "decode": int(v.split(":")[1])})


@dataclass(frozen=True)
class Sweep:
    """A sweep profile: the inner kind, inside any outer dimensions (outermost first)."""

    base: PointBase
    inner: Inner
    outer: tuple[Outer[Any], ...] = ()

    def cells(self) -> list[tuple[PointBase, dict[str, object], list[str]]]:
        """(base, tags, titles) of every combination of the outer values."""
        cells: list[tuple[PointBase, dict[str, object], list[str]]] = [(self.base, {}, [])]
        for dim in self.outer:
            cells = [(b.under(dim.sub(v), dim.overrides(v)),
                      {**tags, dim.key: v, **dim.tags(v)}, [*titles, dim.title(v)])
                     for b, tags, titles in cells for v in dim.values]
        return cells

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], SweepAnswer]:
        """Every cell's points in one batch; rows tagged with their cell."""
        cells = self.cells()
        plans = [self.inner.plan(b, width) for b, _, _ in cells]
        batches = [next(p) for p in plans]
        results = yield [pt for batch in batches for pt in batch]
        rows: list[dict[str, Any]] = []
        sections: list[tuple[str, list[dict[str, Any]]]] = []
        start = 0
        for plan, batch, (_, tags, titles) in zip(plans, batches, cells, strict=True):
            mine = results[start:start + len(batch)]   # short: cut by a failure it raises
            start += len(batch)
            try:
                plan.send(mine)
            except StopIteration as done:
                part = [{**tags, **row} for row in done.value]
            else:
                raise RuntimeError("a sweep's inner profile asked for a second batch")
            rows += part
            sections.append((" · ".join(titles), part))
        per_kv_tier = any(d.key == "kv_offload_gib" for d in self.outer)
        stem = f"{self.inner.name}-tiers" if per_kv_tier and self.inner.name == "sweep" else ""
        return SweepAnswer(self.inner.name, rows, sections, stem)


# ------------------------------------------------------------------------ parsing --
def parse_counts(text: str, what: str = "--sessions") -> tuple[int, ...]:
    """`1,2,4` → positive counts, no duplicates; one InputError line otherwise."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what}: expected a comma-separated list of integers, got {text!r}") \
            from None
    if not counts or any(n < 1 for n in counts):
        raise InputError(f"{what}: expected positive counts, got {text!r}")
    if len(set(counts)) < len(counts):
        raise InputError(f"{what}: a count is listed twice ({text})")
    return tuple(counts)


def parse_values(key: str, text: str) -> tuple[str, ...]:
    """`--set KEY=a,b,c` values: non-empty, no duplicates (one InputError line)."""
    values = [v.strip() for v in text.split(",")]
    if any(not v for v in values):
        raise InputError(f"--set {key}={text}: an empty value in the list")
    if len(set(values)) < len(values):
        raise InputError(f"--set {key}: a value is listed twice ({','.join(values)})")
    return tuple(values)


def parse_specs(text: str) -> tuple[str, ...]:
    """`off,ngram:5,ngram:24` → the speculation settings, two or more, each checked
    (one InputError line otherwise)."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if len(specs) < 2:
        raise InputError(f"--spec: a comparison needs two or more settings, got {text!r}")
    if len(set(specs)) < len(specs):
        raise InputError(f"--spec: a setting is listed twice ({text})")
    for s in specs:
        try:
            parse_spec(s)
        except ValueError as exc:
            raise InputError(f"--spec: {exc}") from None
    return tuple(specs)
