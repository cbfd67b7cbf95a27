"""The P/D sizing answer as text: `size --team M --pd` (`analysis.pd_sizing`)."""

from __future__ import annotations

from collections.abc import Mapping

from simulator.analysis.pd_sizing import PDSizing


def _cell(v: float | None, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def format_pd_sizing(s: PDSizing) -> str:
    agg = (f"{s.aggregated} card(s)" if s.aggregated else f"more than {s.max_cards} cards")
    pd = (f"{sum(s.split)} card(s) as {s.split[0]} prefill : {s.split[1]} decode"
          if s.split else f"no split within {s.max_cards} cards")
    lines = [f"team of {s.team_sessions} sessions: aggregated (session affinity) needs {agg}; "
             f"P/D needs {pd}"]
    beside = s.beside()
    if beside is not None:
        lines.append(f"on the same {beside['cards']} cards:")
        lines.append(f"  {'':<16}{'goodput/card':>14}{'$/h':>9}{'tok/s/sess':>12}"
                     f"{'TTFT p95':>10}{'ITL p95':>10}{'remote':>8}")
        for name, row in ((f"P/D {s.split[0]}:{s.split[1]}" if s.split else "P/D",
                           beside["pd"]),
                          (f"aggregated {beside['cards']}", beside["aggregated"])):
            if not isinstance(row, Mapping):      # `beside` writes a dict per side
                continue
            ok = "" if row.get("passed") else " (fails)"
            lines.append(f"  {name + ok:<16}{_cell(row['goodput_per_card_tok_s'], ',.1f'):>14}"
                         f"{_cell(row['usd_per_hour'], ',.2f'):>9}"
                         f"{_cell(row['per_session_tok_s'], ',.1f'):>12}"
                         f"{_cell(row['ttft_p95_s'], '.2f'):>10}"
                         f"{_cell(row['itl_p95_s'] and row['itl_p95_s'] * 1e3, '.1f'):>8}ms"
                         f"{_cell(row['remote_prefill_share'], '.0%'):>8}")
    for p in sorted(s.agg_probes, key=lambda p: p.replicas):
        lines.append(f"  aggregated R={p.replicas:>3}: {'pass' if p.passed else 'FAIL'}"
                     + (f"  ({'; '.join(p.failed)})" if p.failed else ""))
    for q in sorted(s.probes, key=lambda p: (p.cards, p.prefill)):
        lines.append(f"  P/D {q.prefill}:{q.decode}: {'pass' if q.passed else 'FAIL'}"
                     + (f"  ({'; '.join(q.failed)})" if q.failed else ""))
    return "\n".join(lines)
