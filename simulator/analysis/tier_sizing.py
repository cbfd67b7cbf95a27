"""Sessions per card against the host KV tier's size (`size/sweep --kv-offload-gib`).

One `size` answer (or `sweep` row set) per tier size, for the scenario's compaction
policy; the table names the binding constraint at each size and the knee: the
smallest tier that reaches (nearly) the most sessions any size gave, i.e. where
HBM stopped being enough and more host memory stops helping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from simulator.analysis.plots import new_figure
from simulator.errors import InputError

KNEE_SHARE = 0.95       # a tier within 5% of the best answer counts as reaching it


def parse_tiers(text: str) -> list[float]:
    """`0,64,256` → [0.0, 64.0, 256.0] (GiB; sorted, no duplicates)."""
    try:
        tiers = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"--kv-offload-gib: expected comma-separated GiB, got {text!r}") \
            from None
    if not tiers or any(t < 0 for t in tiers):
        raise InputError(f"--kv-offload-gib: expected sizes >= 0 GiB, got {text!r}")
    return tiers


def tier_set(gib: float) -> str:
    """The `--set` that gives a run this tier."""
    return f"twin.kv_offload_gib={gib:g}"


def policy_of(sets: Sequence[str]) -> str:
    """The compaction policy a `--set compaction.kind=…` names (else the scenario's)."""
    for s in reversed(sets):
        key, _, value = s.partition("=")
        if key.strip() == "compaction.kind":
            return value.strip()
    return "scenario"


def knee(rows: Sequence[dict[str, Any]]) -> float | None:
    """The smallest tier (GiB) whose answer is within 5% of the best; None when none."""
    best = max((r["sessions"] for r in rows), default=0)
    if best <= 0:
        return None
    return float(min(r["kv_offload_gib"] for r in rows if r["sessions"] >= KNEE_SHARE * best))


def format_tier_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per tier size: sessions meeting the SLOs, range, binding, cards."""
    head = ["tier GiB", "policy", "sessions", "range", "binding", "cards"]
    table = [head]
    for r in rows:
        lo, hi = r.get("sessions_range") or (r["sessions"], r["sessions"])
        cards = r.get("cards")
        table.append([f"{r['kv_offload_gib']:g}", str(r.get("policy", "")), str(r["sessions"]),
                      f"{lo}–{hi}", f"{r.get('binding')} [{r.get('binding_kind')}]",
                      "n/a" if not cards else f"{cards[0]}–{cards[1]}"])
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    k = knee(rows)
    base = next((r["sessions"] for r in rows if r["kv_offload_gib"] == 0), None)
    notes = []
    if base is not None:
        notes.append(f"HBM alone (tier 0): {base} sessions")
    notes.append("knee: no tier size meets the SLOs" if k is None else
                 f"knee: {k:g} GiB reaches ≥{KNEE_SHARE:.0%} of the most sessions any tier gave")
    return "\n".join(["sessions per card by host KV tier — SIMULATED (twin)", *lines, *notes])


def plot_tiers(rows: Sequence[dict[str, Any]]) -> Figure:
    """Sessions meeting the SLOs against tier size, one line per policy."""
    fig = new_figure(7.0, 4.0)
    ax = fig.add_subplot()
    for policy in sorted({str(r.get("policy", "")) for r in rows}):
        mine = sorted((r for r in rows if str(r.get("policy", "")) == policy),
                      key=lambda r: r["kv_offload_gib"])
        ax.plot([r["kv_offload_gib"] for r in mine], [r["sessions"] for r in mine], "o-",
                label=policy)
    k = knee(rows)
    if k is not None:
        ax.axvline(k, color="grey", ls=":", label=f"knee {k:g} GiB")
    ax.set(title="Sessions per card vs host KV tier — simulated",
           xlabel="host KV tier (GiB, --kv-offload-gib)", ylabel="sessions meeting the SLOs")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
