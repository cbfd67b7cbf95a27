"""`RunSummary`: a run's figures, built once from its rows and the engine's counters.

The figures are the registry's metrics (`metrics_registry`), by key; everything else a
summary carries (breakdowns, provenance, the run's status) is a fact. `run.finish` builds
one when a run ends and saves `to_json()` as summary.json; the same typed value is the
run's `RunResult.summary` and each point's summary in a sweep or a sizing search, so one
key means one figure in summary.json, sweep.json and size.json. `report`, `compare` and
the notebooks rebuild the same figures from the saved rows with `summarize_run`, and read
old summary.json files through `from_json` (renamed keys included).

Code reads a figure by its registry key, which mypy checks: `s.figure("window_ttft_p95_s")`,
or `s.record()` (a `metric_keys.SummaryRecord`, each key typed) where a summary and a
sweep row are read alike (`Summary`, `record_of`). A `RunSummary` is also a read-only
mapping of the keys summary.json has (figures in registry order, then facts), for
notebooks and older callers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, overload

import pandas as pd

from simulator.analysis import metrics_registry as registry
from simulator.analysis.goodput import GoodputSlo
from simulator.analysis.metric_keys import (
    FactKey,
    LabelKey,
    MetricKey,
    NumberKey,
    SummaryRecord,
    as_record,
)
from simulator.analysis.steady import SteadyConfig
from simulator.analysis.summary import summarize

Figure = float | int | str | None   # a label metric's value is a string


@dataclass(frozen=True, slots=True)
class RunFacts:
    """How a run ended and what it ran against: the facts `runs` adds to a summary when
    the run finishes (typed, so a misspelt or mistyped fact fails mypy, not a reader)."""

    status: str                          # completed | interrupted | failed
    status_reason: str
    failed_sessions: list[str]
    deadline_reached: bool
    run_id: str
    simulated: bool
    contains_verbatim_content: bool
    twin: Mapping[str, object] | None = None   # the twin's description (simulated runs)
    time_scale: float | None = None         # an HTTP twin's --time-scale

    def as_facts(self) -> dict[str, object]:
        """The summary's fact keys, in the order summary.json has always had them."""
        out: dict[str, object] = {
            "status": self.status, "status_reason": self.status_reason,
            "failed_sessions": self.failed_sessions, "deadline_reached": self.deadline_reached,
            "run_id": self.run_id, "simulated": self.simulated,
            "contains_verbatim_content": self.contains_verbatim_content}
        if self.twin is not None:
            out["twin"] = dict(self.twin)
        if self.time_scale is not None:
            out["time_scale"] = self.time_scale
        return out


@dataclass(frozen=True, slots=True)
class RunSummary(Mapping[str, Any]):
    """Registry metrics by key (every one present, None when unknown; the steady
    window's only when the run computed one) and the facts."""

    figures: Mapping[str, Figure]
    facts: Mapping[str, Any]          # values as summary.json holds them (`record()` types them)

    @classmethod
    def build(cls, turns: pd.DataFrame, *, price_per_hour: float | None, simulated: bool,
              server_metrics: pd.DataFrame | None = None,
              engine_stats: Mapping[str, object] | None = None,
              steady: SteadyConfig | None = None,
              goodput: GoodputSlo | None = None,
              telemetry: Sequence[Mapping[str, object]] | None = None) -> RunSummary:
        """From the turns table (one row per attempt), the scraped server metrics and the
        in-process engine's counters: the one place a run's figures are computed.
        `telemetry`: the --scrape targets' health (a failed one measures nothing)."""
        return cls.from_json(summarize(turns, price_per_hour=price_per_hour,
                                       simulated=simulated, server_metrics=server_metrics,
                                       engine_stats=engine_stats, steady=steady,
                                       goodput=goodput, telemetry=telemetry))

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunSummary:
        """From a summary dict or summary.json (older key names are renamed). A key the
        registry does not know is kept as a fact (tests flag it as unregistered)."""
        d = registry.upgrade(data)
        steady_only = set(registry.STEADY_KEYS)
        figures: dict[str, Figure] = {k: cast(Figure, d.get(k)) for k in registry.NUMERIC_KEYS
                   if k in d or k not in steady_only}   # window figures only when computed
        facts = {k: v for k, v in d.items() if k not in registry.REGISTRY}
        return cls(figures, facts)

    @overload
    def figure(self, key: NumberKey) -> float | None: ...
    @overload
    def figure(self, key: LabelKey) -> str | None: ...
    @overload
    def figure(self, key: MetricKey) -> float | str | None: ...

    def figure(self, key: MetricKey) -> float | str | None:
        """A registry figure (None when unknown or not computed)."""
        return self.figures.get(key)

    def fact(self, key: FactKey) -> object:
        """A fact (None when the summary has none)."""
        return self.facts.get(key)

    def record(self) -> SummaryRecord:
        """The summary as a typed record (summary.json's keys, each typed)."""
        return as_record(self.to_json())

    def __getitem__(self, key: str) -> Any:
        """A figure by registry key (or an old alias), else a fact (KeyError if neither)."""
        key = registry.ALIASES.get(key, key)
        if key in self.figures:
            return self.figures[key]
        return self.facts[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.figures
        yield from self.facts

    def __len__(self) -> int:
        return len(self.figures) + len(self.facts)

    def with_facts(self, **facts: object) -> RunSummary:
        """A copy with these facts added or replaced (status, run id, …)."""
        return dataclasses.replace(self, facts={**self.facts, **facts})

    def with_run_facts(self, facts: RunFacts) -> RunSummary:
        """A copy with how the run ended and what it ran against."""
        return self.with_facts(**facts.as_facts())

    def to_json(self) -> dict[str, object]:
        """The flat dict saved as summary.json: figures in registry order, then facts."""
        return {**self.figures, **self.facts}

    @property
    def simulated(self) -> bool:
        return bool(self.facts.get("simulated", False))

    @property
    def ok_turns(self) -> int:
        """Successful turn requests (what older summaries called `turns`)."""
        return int(self.figures["ok_turns"] or 0)

    def unregistered(self) -> list[str]:
        """Facts that look like metrics but are not in the registry (should be none)."""
        return sorted(k for k in self.facts if k not in registry.FACT_KEYS)


# A summary as code receives one: the run's `RunSummary`, or a record read from JSON
# (a sweep row, a size.json probe); `record_of` reads both as one typed record.
Summary = RunSummary | SummaryRecord


def record_of(s: Summary) -> SummaryRecord:
    """The typed record of a summary (a record passes unchanged)."""
    return s.record() if isinstance(s, RunSummary) else s
