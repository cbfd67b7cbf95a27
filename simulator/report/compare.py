"""`endurance compare` shown: the terminal table of a `Comparison`, and the overlay plot."""

from __future__ import annotations

from pathlib import Path

from simulator.analysis.compare import Comparison, Paired, RunInfo
from simulator.analysis.recall import PairedRecall
from simulator.analysis.summary import ok_rows
from simulator.report.plots import plot_overlay


def _cell(v: object) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


def format_comparison(result: Comparison) -> str:
    """Terminal table: one column per run, % difference against the first run."""
    labels = [r["label"] + (" (SIM)" if r["simulated"] else "") for r in result["runs"]]
    header = ["figure", labels[0], *[f"{lab} (Δ vs first)" for lab in labels[1:]]]
    rows = [header]
    for k, vals in result["figures"].items():
        unit = "pp" if k in result["pp_vs_first"] else "%"
        diffs = (result["pp_vs_first"].get(k) or result["pct_vs_first"].get(k)
                 or [None] * (len(vals) - 1))
        rows.append([k, _cell(vals[0]), *[
            _cell(v) + ("" if d is None else f" ({d:+.1f}{unit})")
            for v, d in zip(vals[1:], diffs, strict=True)]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    for p in result["paired"]:
        if p["ratio"] is None:
            lines.append(f"paired {p['label_b']} / {p['label_a']}: no matched turns")
            continue
        lines.append(
            f"paired {p['label_b']} / {p['label_a']}: sustained tok/s ratio "
            f"{p['ratio']:.3f}, {100 * p['confidence']:.0f}% CI [{p['ci_low']:.3f}, "
            f"{p['ci_high']:.3f}] over {p['matched_turns']} matched turns "
            f"({p['resamples']} block-bootstrap resamples"
            + (f"; runs differ in {', '.join(p['differs_in'])})" if p["differs_in"] else ")")
            + ("; the difference is clear" if p["excludes_one"] else "; CI includes 1"))
        lines += [_recall_line(p, what, d) for what, d in (("probe recall", p["recall"]),
                                                           ("fact retention", p["retention"]))
                  if d.get("pairs")]
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)


def _recall_line(p: Paired, what: str, d: PairedRecall) -> str:
    """One paired recall (or retention) line: B − A in points with its interval."""
    a, b = d["a"], d["b"]
    assert a is not None and b is not None     # both runs answered `pairs` > 0 probes

    def pp(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:+.1f}"
    ci = "no interval (one session, one fact)" if d["ci_low"] is None else \
        f"95% CI [{pp(d['ci_low'])}, {pp(d['ci_high'])}] pp"
    lo, hi = d["ci_low"], d["ci_high"]
    clear = lo is not None and hi is not None and not (lo <= 0.0 <= hi)
    return (f"paired {p['label_b']} − {p['label_a']}: {what} {100 * b:.1f}% vs "
            f"{100 * a:.1f}%, {pp(d['difference'])} pp, {ci} over {d['pairs']} probes "
            "both runs asked" + ("; the difference is clear" if clear else
                                 "; CI includes 0" if d["ci_low"] is not None else ""))


def compare_folder(runs: list[RunInfo]) -> Path:
    """The comparison's own folder beside the first run (never inside a run directory,
    which belongs to that run): `compare-<id>-vs-<id>…` from the runs' short ids."""
    ids = "-vs-".join(r.run_dir.name.rsplit("-", 1)[-1] for r in runs)
    return runs[0].run_dir.parent / f"compare-{ids}"


def overlay_figure_path(runs: list[RunInfo], out: Path | None) -> Path:
    """Where the overlay PNG goes: `out` (a file or a folder) or the comparison's own
    folder (`compare_folder`)."""
    if out is None:
        return compare_folder(runs) / "compare_overlay.png"
    return out / "compare_overlay.png" if out.suffix.lower() != ".png" else out


def write_overlay(runs: list[RunInfo], out: Path | None = None) -> Path:
    """Draw the rolling-median overlay of all runs and save it as PNG; returns its path."""
    path = overlay_figure_path(runs, out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = plot_overlay([(r.label, ok_rows(r.turns, "turn")) for r in runs],
                       simulated=[bool(r.summary.get("simulated")) for r in runs])
    fig.savefig(path, format="png")
    return path
