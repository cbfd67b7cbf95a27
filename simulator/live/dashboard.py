"""Presenting a `LiveSnapshot`: the terminal dashboard (a rich renderable) and the
one-line status a non-terminal gets. Formatting only; the figures are `live.figures`'.

The dashboard's last column, "run", is the whole run so far by the summary's own
definitions: when the run ends it shows summary.json's figures (the tmux test reads
them off the screen and compares).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from simulator.analysis.metric_keys import SummaryRecord
from simulator.live.figures import LiveSnapshot, RunFigures, WindowFigures
from simulator.util.formats import number, percent

if TYPE_CHECKING:       # rich loads with the dashboard's first frame, not a plain line
    from rich.console import RenderableType


def _num(v: float | None, fmt: str = "{:,.1f}") -> str:
    return number(v, fmt, missing="—")


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v * 1000:,.0f} ms" if v < 1.0 else f"{v:,.2f} s"


def _pct(v: float | None) -> str:
    return percent(v, missing="—")


def _failures(f: Mapping[str, int]) -> str:
    return "0" if not f else ", ".join(f"{k} {v}" for k, v in f.items())


def _window_label(w: WindowFigures, nominal: float) -> str:
    name = f"last {nominal:.0f} s" if nominal < 120 else f"last {nominal / 60:.0f} min"
    return name if w.span_s >= nominal - 1 else f"{name} ({w.span_s:.0f} s so far)"


def rows(snap: LiveSnapshot) -> list[tuple[str, list[str], str]]:
    """(figure, one cell per rolling window, whole run) — the table's rows."""
    r, ws = snap.run, snap.windows
    return [
        ("output tok/s, server (/metrics)", [_num(w.server_tok_s) for w in ws], ""),
        ("aggregate tok/s (finished requests)", [_num(w.aggregate_tok_s) for w in ws],
         _num(r.aggregate_tok_s)),
        ("per-session tok/s (while generating)", [_num(w.per_session_tok_s) for w in ws], ""),
        ("TTFT p50", [_ms(w.ttft_p50_s) for w in ws], _ms(r.ttft_p50_s)),
        ("TTFT p95", [_ms(w.ttft_p95_s) for w in ws], _ms(r.ttft_p95_s)),
        ("ITL p50", [_ms(w.itl_p50_s) for w in ws], ""),
        ("requests", [f"{w.requests:,}" for w in ws], f"{r.requests:,}"),
        ("concurrency (mean in flight)", [_num(w.concurrency) for w in ws], ""),
        ("cache read (server-reported)", [_pct(w.cache_read_share) for w in ws],
         _pct(r.server_cache_read_share)),
        ("reusable prefix (client bound)", [_pct(w.client_reusable_share) for w in ws],
         _pct(r.client_reusable_share)),
        ("failures", [_failures(w.failures) for w in ws], f"{r.failed_requests:,}"),
        ("preemptions (server)", [_num(w.preemptions, "{:,.0f}") for w in ws],
         _num(snap.server.get("preemptions_total"), "{:,.0f}")),
    ]


def final_line(r: RunFigures) -> str:
    """The whole run on one line (the dashboard's foot and the plain status's end)."""
    comp = ", ".join(f"{k} {v}" for k, v in r.compactions_by_kind.items())
    recall = "" if r.probes_answered == 0 else \
        f" · probe recall {_pct(r.probe_recall)} of {r.probes_answered:,}"
    return (f"run: requests {r.requests:,} · ok turns {r.ok_turns:,} · failed "
            f"{r.failed_requests:,} · output tokens {r.output_tokens:,} · "
            f"{_num(r.aggregate_tok_s, '{:,.2f}')} tok/s · TTFT p50 {_num(r.ttft_p50_s, '{:.4f}')} s"
            f" p95 {_num(r.ttft_p95_s, '{:.4f}')} s · compactions {r.compaction_events:,}"
            + (f" ({comp})" if comp else "") + recall
            + ("" if r.remote_prefill_share is None else
               f" · P/D remote prefills {_pct(r.remote_prefill_share)}, KV wait p95 "
               f"{_num(r.kv_transfer_wait_p95_s, '{:.3f}')} s"))


def _server_line(snap: LiveSnapshot) -> str | None:
    s = snap.server
    parts = []
    if "kv_usage" in s:
        parts.append(f"KV usage {_pct(s['kv_usage'])}")
    if "requests_running" in s:
        parts.append(f"running {s['requests_running']:,.0f}")
    if "requests_waiting" in s:
        parts.append(f"queued {s['requests_waiting']:,.0f}")
    if "preemptions_total" in s:
        parts.append(f"preemptions {s['preemptions_total']:,.0f}")
    if "prefix_cache_queries_total" in s and s["prefix_cache_queries_total"] > 0:
        parts.append("prefix-cache hits "
                     + _pct(s.get("prefix_cache_hits_total", 0.0)
                            / s["prefix_cache_queries_total"]))
    return "server /metrics: " + " · ".join(parts) if parts else None


def energy_line(e: SummaryRecord | None) -> str | None:
    if not e:
        return None
    parts = [f"{e['gpu_power_mean_w']:,.0f} W mean"]
    if e.get("gpu_util_mean") is not None:
        parts.append(f"util {_pct(e['gpu_util_mean'])}")
    if e.get("energy_wh_per_mtok") is not None:
        parts.append(f"{e['energy_wh_per_mtok']:,.1f} Wh per 1M output tokens")
    if e.get("sessions_per_kw") is not None:
        parts.append(f"{e['sessions_per_kw']:,.2f} sessions per kW")
    return "GPU: " + " · ".join(parts) + f" ({e.get('energy_source')})"


def sessions_line(snap: LiveSnapshot) -> str:
    line = (f"sessions: {snap.sessions_active:,} active · {snap.sessions_done:,} done · "
            f"{snap.sessions_started:,} started")
    if "in_flight" in snap.live:
        line += f" · requests in flight {snap.live['in_flight']:,}"
    if snap.live.get("waiting"):
        line += f" · waiting at the client's limit {snap.live['waiting']:,}"
    if snap.context_spread is not None:
        p10, p50, p90, mx = snap.context_spread
        line += f" · context p10 {p10:,} / p50 {p50:,} / p90 {p90:,} / max {mx:,} tokens"
    return line


def table_lines(snap: LiveSnapshot) -> list[str]:
    """The figures table as fixed-width lines (formatted here: a rich `Table` costs
    ten times as much to draw every second)."""
    cols = [_window_label(w, n) for w, n in zip(snap.windows, (30.0, 300.0), strict=False)]
    body = rows(snap)
    name_w = max(len("figure"), *(len(r[0]) for r in body))
    widths = [max(len(c), *(len(r[1][i]) for r in body)) for i, c in enumerate(cols)]
    run_w = max(len("run"), *(len(r[2]) for r in body))
    out = ["figure".ljust(name_w) + "".join(f"  {c:>{w}}" for c, w in zip(cols, widths,
                                                                          strict=True))
           + f"  {'run':>{run_w}}"]
    for name, cells, whole in body:
        out.append(name.ljust(name_w) + "".join(f"  {c:>{w}}" for c, w in zip(
            cells, widths, strict=True)) + f"  {whole:>{run_w}}")
    return out


def render(snap: LiveSnapshot, header: Sequence[str] = ()) -> RenderableType:
    """The dashboard: header lines, the figures table, state lines and the last events."""
    from rich.text import Text
    text = Text(no_wrap=False)

    def line(s: str, style: str = "") -> None:
        text.append(s + "\n", style=style)
    for h in header:
        line(h, "bold")
    line(f"run clock {snap.now_s:,.1f} s · {snap.steady}")
    if snap.ramp:
        line(snap.ramp, "magenta")
    head, *body = table_lines(snap)
    line(head, "bold")
    for row in body:
        line(row)
    line(sessions_line(snap))
    for extra in (_server_line(snap), energy_line(snap.energy)):
        if extra:
            line(extra)
    if snap.events:
        line("last events:", "bold")
        for e in snap.events:
            line("  " + e)
    text.append(final_line(snap.run), style="cyan")
    return text


def status_line(snap: LiveSnapshot, prefix: str = "") -> str:
    """One line for a log (no terminal): the last 30 s, the whole run, the state."""
    w = snap.windows[0]
    r = snap.run
    parts = [f"t {snap.now_s:,.0f} s",
             f"30 s: {_num(w.aggregate_tok_s)} tok/s, TTFT p50 {_ms(w.ttft_p50_s)}, "
             f"{w.requests:,} requests",
             f"run: {r.requests:,} requests, {r.output_tokens:,} output tokens, "
             f"{r.failed_requests:,} failed, {r.compaction_events:,} compactions",
             f"{snap.sessions_active:,} sessions active"]
    if "kv_usage" in snap.server:
        parts.append(f"KV {_pct(snap.server['kv_usage'])}")
    if snap.energy and snap.energy.get("energy_wh_per_mtok") is not None:
        parts.append(f"{snap.energy['energy_wh_per_mtok']:,.1f} Wh/1M tok (measured)")
    parts.append(snap.ramp or snap.steady)
    return (prefix + " · ".join(parts)).replace("\n", " ")
