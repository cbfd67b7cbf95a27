"""Terminal tables of many-run answers: a sweep, a sizing search.

Every number is formatted by the registry's metric (`Metric.format`), so a table and the
summary print a figure alike; "n/a" where a figure is unknown (a point that never
reached steady state has no window figures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.analysis import metrics_registry as registry
from simulator.analysis.cache_bound import cache_bound_warning
from simulator.analysis.goodput import goodput_label
from simulator.analysis.metric_keys import MetricKey, SummaryRecord, fact, figure
from simulator.analysis.point_row import PointRow
from simulator.analysis.ramp import held_steps, read_ramp
from simulator.analysis.recall import recall_table_row
from simulator.analysis.run_summary import Summary, record_of
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import judged_on
from simulator.analysis.summary import VERBATIM_WARNING
from simulator.util.formats import number
from simulator.util.numbers import to_float


def flag(v: object) -> str:
    return {True: "yes", False: "NO"}.get(v, "n/a") if isinstance(v, bool) else "n/a"


def cell(key: str, v: object) -> str:
    """A table cell: the registry's format, without the % sign the header carries."""
    if key == "steady_state":
        return flag(v)
    m = registry.REGISTRY.get(key) or registry.REGISTRY["aggregate_tok_s"]
    return m.format(v).removesuffix("%")


def align(table: Sequence[Sequence[str]], left: bool = False) -> list[str]:
    """Rows of cells padded to their column's width (right-aligned unless `left`)."""
    widths = [max(len(t[i]) for t in table) for i in range(len(table[0]))]
    if left:
        return ["  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip()
                for t in table]
    return ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]


def mode(rows: Sequence[SummaryRecord]) -> str:
    return "SIMULATED (twin)" if any(fact(r, "simulated") for r in rows) else "real endpoint"


def format_sweep_table(rows: Sequence[PointRow]) -> str:
    """Terminal table, one line per session count; SIMULATED flagged in the title."""
    cols = registry.SWEEP_COLUMNS
    table = [[header for _, header in cols]]
    table += [[cell(k, r.get(k)) for k, _ in cols] for r in rows]
    title = f"sweep — {mode(rows)}" if rows else "sweep — no points"
    notes = [f"{'SATURATED' if fact(r, 'saturated') else 'NOT STEADY'} at "
             f"{figure(r, 'requested_sessions')} sessions (achieved "
             f"{number(figure(r, 'achieved_sessions'))}): {fact(r, 'steady_state_reason')}"
             for r in rows if fact(r, "steady_state") is False]
    tiers = [(figure(r, "requested_sessions"), (fact(r, "kv_tier") or {}).get("post_idle_ttft_p50_s"))
             for r in rows if r.get("kv_offload_gib") is not None]
    if tiers:
        notes.append("post-idle TTFT p50 (whole run) by sessions: " + ", ".join(
            f"{n}: {number(v, '{:.2f}')} s" for n, v in tiers))
    if any(fact(r, "steady_state") is not None for r in rows):
        notes.append("window aggregate, per-session, TTFT, turns/s and $/1M: the steady-state "
                     "window (n/a when never steady); run aggregate: whole run incl. ramp "
                     "and tail")
        notes.append("closed loop: each session waits for its reply, so a slower server is "
                     "offered fewer turns/s (coordinated omission); read turns/s with TTFT")
    return "\n".join([title, *align(table), *notes])


def format_sizing(result: SizingResult, target: str | None = None) -> str:
    """The answer, what was sized (`target`: hardware, model, scenario), the binding
    constraint, the range over seeds, the cards for a team, then every probe."""
    slos = " and ".join(str(s) for s in result.slos)
    sim = any(fact(record_of(p.summary), "simulated") for p in result.probes)
    again = "with another seed" if result.reseeded else "with the same seed"
    lo, hi = result.sessions_range
    every = (f" with every one of {len(result.answers)} seeds (range {lo}–{hi})"
             if len(result.answers) > 1 else "")
    head = (f"{result.sessions} session(s) meet {slos}{every}"
            + (f" (confirmed by a repeat {again})" if result.confirmed else "")
            + (" — SIMULATED (twin)" if sim else ""))
    if result.sessions == 0:
        head = f"no session count meets {slos}{every}" + (" — SIMULATED (twin)" if sim else "")
    lines = [head, *([f"sized: {target}"] if target else []),
             f"binding constraint: {result.binding} [{result.binding_kind}]",
             f"SLOs judged on {judged_on([p.summary for p in result.probes])}"]
    if len(result.answers) > 1:
        over = (f"{len(result.answers)} seeds" if result.reseeded
                else f"{len(result.answers)} searches with the same seed")
        lines.append(f"range over {over}: {lo}–{hi} sessions "
                     f"(per search: {', '.join(map(str, result.answers))})")
    cards = result.cards()
    if cards is not None:
        lines.append(f"a team of {result.team_sessions} sessions needs "
                     + (f"{cards[0]} card(s)" if cards[0] == cards[1]
                        else f"{cards[0]}–{cards[1]} cards"))
    if result.kv_capacity_sessions is not None:
        lines.append(f"KV-capacity bound: {result.kv_capacity_sessions} sessions at peak context")
    for p in result.probes:
        figs = ", ".join(f"{s.metric}={number(s.value(p.summary), '{:.2f}')}"
                         for s in result.slos)
        verdict = "pass" if p.passed else "FAIL " + ", ".join(p.failed)
        seed = f" seed +{p.seed_offset}" if p.seed_offset else ""
        ach = figure(record_of(p.summary), "achieved_sessions")
        ach_s = f" (achieved {ach:.1f})" if isinstance(ach, int | float) else ""
        lines.append(f"  probe {p.sessions:>4} sessions{seed}{ach_s}: {figs}  → {verdict}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def energy_row(s: SummaryRecord) -> tuple[str, str]:
    """Measured GPU power and what it gives, labelled with the exporter it came from."""
    def fmt(key: MetricKey) -> str:
        return registry.BY_KEY[key].format(s.get(key))
    return ("GPU power, util / Wh per 1M output tokens / sessions per kW",
            f"{fmt('gpu_power_mean_w')} W, {fmt('gpu_util_mean')} / "
            f"{fmt('energy_wh_per_mtok')} / {fmt('sessions_per_kw')} "
            f"({fact(s, 'energy_source')})")


def pd_rows(s: SummaryRecord) -> list[tuple[str, str]]:
    """The P/D figures (a run with `fleet.prefill` > 0)."""
    def fmt(key: MetricKey) -> str:
        return registry.BY_KEY[key].format(s.get(key))
    return [("P/D: remote prefills / KV pulled (GB) / KV wait p95 (s)",
             f"{fmt('remote_prefill_share')} / {fmt('kv_transfer_gb')} / "
             f"{fmt('kv_transfer_wait_p95_s')}"),
            ("P/D: TTFT queue / prefill / transfer",
             f"{fmt('ttft_queue_share')} / {fmt('ttft_prefill_share')} / "
             f"{fmt('ttft_transfer_share')}"),
            ("P/D: prefill / decode utilisation",
             f"{fmt('prefill_utilization')} / {fmt('decode_utilization')}")]


def format_telemetry(block: Sequence[Mapping[str, object]]) -> list[str]:
    """One line per --scrape target that failed, lied or missed scrapes (the run's
    `telemetry` block); a clean target is already named by the energy row."""
    lines: list[str] = []
    for t in block:
        status, reason = t.get("status"), t.get("reason")
        dup = t.get("duplicate_series")
        if status == "ok" and not reason and not dup:
            continue
        tail = "; no energy figures from it" if status != "ok" else ""
        why = f" ({reason})" if reason else ""
        dups = f"; {dup} duplicate series counted once" if dup else ""
        lines.append(f"telemetry: {t.get('target')}: {status}{why}{dups}{tail}")
    return lines


def summary_table(summary: Summary) -> list[tuple[str, str]]:
    """(label, formatted value) pairs shared by the terminal, markdown and HTML views:
    the registry's rows, with the request breakdown, compaction kinds and price beside."""
    s = record_of(summary)
    kinds = ", ".join(f"{k}×{v}" for k, v in s.get("compactions_by_kind", {}).items())
    extra = {
        "compaction events": f" ({kinds})" if kinds else "",
        "$ per 1M output tokens": (f" at {s['price_per_hour']} $/h"
                                   if fact(s, "price_per_hour") is not None else ""),
    }
    rows = [("mode", "SIMULATED (twin)" if s["simulated"] else "real endpoint")]
    for label, value in registry.table_rows(s):
        rows.append((label, value + extra.get(label, "")))
        if label == "$ per 1M output tokens" and figure(s, "tokens_per_forward_pass") is not None:
            rows.append(("tokens per forward pass (mean acceptance length, acceptance)",
                         registry.BY_KEY["tokens_per_forward_pass"].format(
                             s["tokens_per_forward_pass"]) + " ("
                         + registry.BY_KEY["spec_mean_acceptance_length"].format(
                             figure(s, "spec_mean_acceptance_length")) + ", "
                         + registry.BY_KEY["spec_acceptance_share"].format(
                             figure(s, "spec_acceptance_share")) + ")"))
        if label == "KV usage peak / preemptions" and figure(s, "gpu_power_mean_w") is not None:
            rows.append(energy_row(s))
        if label == "KV usage peak / preemptions" and figure(s, "remote_prefill_share") is not None:
            rows.extend(pd_rows(s))
        if label == "cache: server counters hit share" and figure(s, "probe_requests"):
            rows.append(recall_table_row(s))
        if label == "sessions / successful turns":
            rows.append(("requests (failed, summary)",
                         f"{s['requests']} ({s['failed_requests']} failed, "
                         f"{s['summary_requests']} summary"
                         + (f", {s['cancelled_requests']} cancelled at stop"
                            if figure(s, "cancelled_requests") else "")
                         + (f", {s['overflow_requests']} context overflow(s) → forced "
                            "compaction" if figure(s, "overflow_requests") else "") + ")"))
    return rows


def _fmt(v: object, unit: str = "", digits: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{digits}f}{unit}"
    return f"{v}{unit}"


def steady_table(summary: Summary) -> list[tuple[str, str]]:
    """Rows for achieved concurrency and the steady-state window (empty for summaries
    made without a steady config)."""
    s = record_of(summary)
    if "requested_sessions" not in s:
        return []
    steady = "yes" if fact(s, "steady_state") else f"NO — {fact(s, 'steady_state_reason')}"
    rows = [
        ("sessions requested / achieved (window)",
         f"{s['requested_sessions']} / {_fmt(figure(s, 'achieved_sessions'))} "
         f"(whole run {_fmt(figure(s, 'achieved_sessions_run'))}); steady state: {steady}"),
        ("in-flight requests, window / whole run",
         f"{_fmt(figure(s, 'achieved_in_flight'))} / {_fmt(figure(s, 'achieved_in_flight_run'))}")]
    if figure(s, "window_s") is not None:
        rows += [
            ("steady-state window", f"{s['window_start_s']:,.1f} s → {s['window_end_s']:,.1f} s "
             f"({s['window_s']:,.1f} s)"),
            ("window aggregate / N × per-session tok/s",
             f"{_fmt(figure(s, 'window_aggregate_tok_s'))} / "
             f"{_fmt(figure(s, 'window_n_x_per_session_tok_s'))} "
             f"(per session {_fmt(figure(s, 'window_per_session_tok_s'))})"),
            ("window TTFT p50 / p95, ITL p50 / p95",
             f"{_fmt(figure(s, 'window_ttft_p50_s'), ' s', 2)} / "
             f"{_fmt(figure(s, 'window_ttft_p95_s'), ' s', 2)}, "
             f"{_fmt(_ms(figure(s, 'window_itl_p50_s')), ' ms', 1)} / "
             f"{_fmt(_ms(figure(s, 'window_itl_p95_s')), ' ms', 1)}"),
            ("window $ per 1M output tokens", _fmt(figure(s, "window_usd_per_mtok"), digits=3))]
    if fact(s, "usd_per_mtok_counts_idle"):
        rows.append(("note", "whole-run $/1M tok counts the card's idle think/tool time"))
    return rows


def _ms(v: float | None) -> float | None:
    return None if v is None else 1000.0 * v


def format_summary(summary: Summary, target: str | None = None) -> str:
    """A compact two-column table for the terminal; SIMULATED is flagged in the title and
    `target` (`analysis.target.describe_target`: hardware, model, scenario) leads it."""
    s = record_of(summary)
    rows = ([("what ran", target)] if target else []) + summary_table(s) + steady_table(s)
    width = max(len(k) for k, _ in rows)
    title = ("=== endurance summary — SIMULATED (twin, not a real server) ==="
             if s["simulated"] else "=== endurance summary — real endpoint ===")
    lines = [title, *(f"{k:<{width}}  {v}" for k, v in rows)]
    warning = cache_bound_warning(s)
    if warning:
        lines.append(f"WARNING: {warning}")
    if fact(s, "contains_verbatim_content"):
        lines.insert(0, VERBATIM_WARNING)
    return "\n".join(lines)


def format_ramp(fact: Mapping[str, object], simulated: bool) -> str:
    """A stepped ramp (summary.json's `ramp` fact): one line per held step (its window's
    figures and, per tier, pass or FAIL), then the answer per tier with its binding
    constraint and margin."""
    ramp = read_ramp(fact)
    steps, tiers = held_steps(ramp), ramp.get("tiers") or []
    plan = ramp.get("plan") or {}
    head = ["step", "sessions", "phase", "held s", "window s", "achieved", "steady",
            "per-session tok/s", "TTFT p95 s", goodput_label(ramp.get("goodput_slo")),
            *[t["name"] for t in tiers]]
    table = [head]
    for st, held in steps:
        f = st.figures
        table.append([str(st.index), str(st.sessions), st.phase, number(held, "{:,.0f}"),
                      number(figure(f, "window_s"), "{:,.0f}"),
                      number(figure(f, "achieved_sessions")), flag(st.steady),
                      cell("window_per_session_tok_s", figure(f, "window_per_session_tok_s")),
                      cell("window_ttft_p95_s", figure(f, "window_ttft_p95_s")),
                      cell("window_goodput_share", figure(f, "window_goodput_share")),
                      *["pass" if p else "FAIL" for p in st.passed]])
    title = (f"ramp — {'SIMULATED (twin)' if simulated else 'real endpoint'}: "
             f"{len(steps)} step(s), each window held {number(plan.get('hold_s'), '{:g}')} s")
    lines = [title, *align(table)]
    lines += [f"step {st.index} not steady: {st.reason}" for st, _ in steps
              if not st.steady and st.reason]
    for t in tiers:
        n = t["sessions"]
        what = " and ".join(t["slos"])
        answer = (f"{n} session(s) meet {what}" if n else f"no step meets {what}")
        if not t.get("complete"):
            answer += " (the ramp ended before its search did: the last complete step)"
        if t.get("confirmed") is not None:
            answer += (", confirmed by a second hold" if t["confirmed"]
                       else ", NOT confirmed by a second hold (marginal)")
        lines.append(f"{t['name']}: {answer}")
        if t.get("binding"):
            lines.append(f"  binding constraint: {t['binding']} [{t['binding_kind']}]")
        if (margin := t.get("margin")) is not None:
            lines.append(f"  margin at {n}: {100 * float(margin):+.1f}% of the "
                         "tightest SLO")
    return "\n".join(lines)


def format_ramp_cost(data: Mapping[str, object]) -> str:
    """What the ramp spent beside the probe searches it is compared with (run time:
    simulated seconds on the twin, wall seconds against a server)."""
    unit = "simulated" if data.get("simulated") else "wall"
    ramp_s = data.get("seconds")
    ramp = _mapping(data.get("ramp"))
    lines = [f"ramp: one run of {number(ramp_s and to_float(ramp_s) / 60, '{:,.1f}')} {unit} "
             f"minutes ({len(_items(ramp.get('steps')))} held steps)"]
    price = data.get("price_per_hour")
    tiers = [_mapping(t) for t in _items(ramp.get("tiers"))]
    if price and len(tiers) > 1:
        lines.append("per card and per $/h: " + "; ".join(
            f"{t['name']}: {t['sessions']} ({to_float(t['sessions']) / to_float(price):,.1f} "
            "per $/h)" for t in tiers))
    for c in map(_mapping, _items(data.get("compared"))):
        lo, hi = _range(c)
        share = (f", the ramp took {to_float(ramp_s) / to_float(c['seconds']):.0%} of it"
                 if ramp_s and c.get("seconds") else "")
        lines.append(f"{c['name']}: {c['sessions']} session(s) (range {lo}–{hi}) in "
                     f"{c['probes']} runs, {number(to_float(c['seconds']) / 60, '{:,.1f}')} "
                     f"simulated minutes of load{share}")
    return "\n".join(lines)


def _mapping(v: object) -> Mapping[str, object]:
    """A JSON object of an answer (empty when missing)."""
    return v if isinstance(v, Mapping) else {}


def _items(v: object) -> list[object] | tuple[object, ...]:
    """A JSON list of an answer (empty when missing)."""
    return v if isinstance(v, list | tuple) else []


def _range(r: Mapping[str, object]) -> tuple[object, object]:
    """An answer's `sessions_range` (lo, hi); its `sessions` twice without one."""
    got = r.get("sessions_range")
    if isinstance(got, list | tuple) and got:
        lo, hi = got
        return lo, hi
    return r["sessions"], r["sessions"]


def format_speed_tiers(rows: Sequence[Mapping[str, object]]) -> str:
    """Sessions per output-speed tier: per card and per $/h of the card."""
    head = ["tier", "TTFT ≤ s", "sessions", "range", "per $/h", "binding"]
    table = [head]
    for r in rows:
        lo, hi = _range(r)
        price = r.get("price_per_hour")
        table.append([str(r["tier"]), number(r["ttft_s"], "{:g}"), str(r["sessions"]),
                      f"{lo}–{hi}", number(to_float(r["sessions"]) / to_float(price)
                                           if price else None, "{:,.1f}"),
                      f"{r.get('binding')} [{r.get('binding_kind')}]"])
    sim = any(p.get("simulated") for r in rows for p in map(_mapping, _items(r.get("probes"))))
    return "\n".join([f"sessions per output-speed tier — {'SIMULATED (twin)' if sim else 'real endpoint'}",
                      *align(table),
                      "a tier holds at N sessions while its share of requests with TTFT ≤ the "
                      "bound and decode tok/s ≥ the tier is at least the attainment, in the "
                      "steady window"])
