"""The speed–recall frontier: one scenario run under several values of one setting
(`endurance sweep … --set compaction.kind=none,prune,block`), each with R seeds.

Pure over the runs' summaries and turns tables: speed is the mean over replicates
(with its min–max), recall and retention are pooled over every replicate's probes
(the bootstrap then resamples sessions of all replicates). A point is on the frontier
when no other point is at least as fast and at least as good at recall, and better in
one of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, cast

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import MetricKey, RecallRecord, SummaryRecord
from simulator.analysis.recall import recall_figures
from simulator.errors import InputError
from simulator.util.numbers import to_float

SPEED_KEY: Literal["per_session_tok_s"] = "per_session_tok_s"   # the whole run's sustained tok/s


class PolicyRow(RecallRecord):
    """One value of the swept setting, as policy-sweep.json keeps it: speed over the
    value's runs, recall pooled over their probes (`RecallRecord`'s figures, and the
    same over the scheduled probes)."""

    setting: str
    value: str
    replicates: int
    sustained_tok_s: float | None
    sustained_tok_s_min: float | None
    sustained_tok_s_max: float | None
    mean_aggregate_tok_s: float | None
    mean_server_cache_read_share: float | None
    mean_ttft_p95_s: float | None
    mean_compaction_events: float | None
    recall_ci_unit: str | None
    recall_by_kind: Mapping[str, Mapping[str, float | None]] | None
    recall_by_age: Mapping[str, Mapping[str, float | None]] | None
    scheduled_probe_requests: int | None
    scheduled_probe_recall: float | None
    scheduled_probe_recall_ci_low: float | None
    scheduled_probe_recall_ci_high: float | None
    scheduled_fact_retention: float | None
    simulated: bool
    requested_sessions: NotRequired[int]
    run_dirs: NotRequired[list[str]]
    frontier: NotRequired[bool]


def _figure(summary: Mapping[str, object], key: MetricKey) -> float | None:
    v = summary.get(key)
    return None if v is None else to_float(v)


def _speed(summary: Mapping[str, object]) -> float | None:
    return _figure(summary, SPEED_KEY)


def _mean(vals: Sequence[float | None]) -> float | None:
    xs = [v for v in vals if v is not None]
    return float(np.mean(xs)) if xs else None


def point_row(setting: str, value: str, summaries: Sequence[Mapping[str, object]],
              turns: Sequence[pd.DataFrame]) -> PolicyRow:
    """One value of the swept setting: speed over replicates, recall pooled."""
    speeds = [_speed(s) for s in summaries]
    known = [v for v in speeds if v is not None]
    allrows = pd.concat(list(turns), ignore_index=True) if turns else None
    pooled: SummaryRecord = recall_figures(allrows) if allrows is not None else {}
    shared: SummaryRecord = (recall_figures(scheduled_probes(allrows))
                             if allrows is not None else {})
    return {
        "setting": setting, "value": value, "replicates": len(summaries),
        "sustained_tok_s": _mean(speeds),
        "sustained_tok_s_min": min(known) if known else None,
        "sustained_tok_s_max": max(known) if known else None,
        # means over the value's runs, named as such (the runs' own figures keep theirs)
        "mean_aggregate_tok_s": _mean([_figure(s, "aggregate_tok_s") for s in summaries]),
        "mean_server_cache_read_share": _mean([_figure(s, "server_cache_read_share")
                                               for s in summaries]),
        "mean_ttft_p95_s": _mean([_figure(s, "ttft_p95_s") for s in summaries]),
        "mean_compaction_events": _mean([_figure(s, "compaction_events")
                                         for s in summaries]),
        "probe_requests": pooled.get("probe_requests"),
        "probes_answered": pooled.get("probes_answered"),
        "probe_recall": pooled.get("probe_recall"),
        "probe_recall_ci_low": pooled.get("probe_recall_ci_low"),
        "probe_recall_ci_high": pooled.get("probe_recall_ci_high"),
        "fact_retention": pooled.get("fact_retention"),
        "fact_retention_ci_low": pooled.get("fact_retention_ci_low"),
        "fact_retention_ci_high": pooled.get("fact_retention_ci_high"),
        "recall_ci_unit": pooled.get("recall_ci_unit"),
        "recall_by_kind": pooled.get("recall_by_kind"),
        "recall_by_age": pooled.get("recall_by_age"),
        # the probes every policy asks (every_turns, at_turns, the end): comparable
        # across policies, where after-compaction probes come at policy-chosen moments
        "scheduled_probe_requests": shared.get("probe_requests"),
        "scheduled_probe_recall": shared.get("probe_recall"),
        "scheduled_probe_recall_ci_low": shared.get("probe_recall_ci_low"),
        "scheduled_probe_recall_ci_high": shared.get("probe_recall_ci_high"),
        "scheduled_fact_retention": shared.get("fact_retention"),
        "simulated": any(bool(s.get("simulated")) for s in summaries),
    }


def scheduled_probes(turns: pd.DataFrame) -> pd.DataFrame:
    """Probe rows asked at a scheduled point (`turn` or `end` among their reasons) and
    every non-probe row."""
    if "probe_reason" not in turns.columns:
        return turns
    reason = turns["probe_reason"].fillna("").astype(str)
    keep = (turns["request_kind"] != "probe") | reason.str.contains(r"\b(?:turn|end)\b")
    return turns[keep]


def frontier_recall(r: PolicyRow) -> tuple[float | None, float | None, float | None]:
    """(recall, low, high) a point is placed by: the scheduled probes' (the same moments
    under every policy) when there are any, else all probes'."""
    if r.get("scheduled_probe_recall") is not None:
        return (r["scheduled_probe_recall"], r.get("scheduled_probe_recall_ci_low"),
                r.get("scheduled_probe_recall_ci_high"))
    return r.get("probe_recall"), r.get("probe_recall_ci_low"), r.get("probe_recall_ci_high")


def mark_frontier(rows: Sequence[Mapping[str, object]]) -> list[PolicyRow]:
    """Rows (`point_row`'s, tagged) with `frontier` set: not dominated in (sustained
    tok/s, recall)."""
    typed = read_policy_rows(rows)

    def pt(r: PolicyRow) -> tuple[float, float] | None:
        s, c = r.get("sustained_tok_s"), frontier_recall(r)[0]
        return None if s is None or c is None else (float(s), float(c))
    out: list[PolicyRow] = []
    for r in typed:
        p = pt(r)
        dominated = p is None or any(
            q is not None and q[0] >= p[0] and q[1] >= p[1] and q != p
            for q in (pt(o) for o in typed))
        out.append(r | {"frontier": not dominated})
    return out


def read_policy_rows(rows: Sequence[Mapping[str, object]]) -> list[PolicyRow]:
    """Rows of `point_row` (or policy-sweep.json's) as typed records."""
    return [cast(PolicyRow, r) for r in rows]


def split_listed_set(sets: Sequence[str]) -> tuple[str, list[str], list[str]] | None:
    """(key, values, the other --set options) when one `--set KEY=a,b,c` lists values;
    None when none does. A value in brackets or braces is one YAML value, not a list."""
    listed = []
    for i, s in enumerate(sets):
        key, sep, val = s.partition("=")
        if sep and "," in val and not val.strip().startswith(("[", "{")):
            listed.append(i)
    if not listed:
        return None
    if len(listed) > 1:
        raise InputError("--set: only one setting may list values (KEY=a,b,c) in a sweep")
    key, _, val = sets[listed[0]].partition("=")
    values = [v.strip() for v in val.split(",") if v.strip()]
    return key.strip(), values, [s for j, s in enumerate(sets) if j != listed[0]]


