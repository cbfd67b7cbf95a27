"""`endurance sweep … --copy 0,0.25,0.5,1 --spec off,ngram:24`: where speculation starts
to pay, by how much the replies copy their context, for each session count.

Pure over the runs' figures. Each (copy level, setting, N, seed) is an ordinary run;
the speed is its whole-run sustained per-session tok/s. The gain of a setting at a
level is the ratio to the first setting's run with the same seed, so R seeds give R
ratios (mean and min–max, as the other sweeps show speed). The reference tokens per
pass (`ngram_reference_tokens_per_pass`, what n-gram speculation would see) is measured
in each run and averaged over the level's runs. The break-even is where the mean
ratio first crosses 1 going up the levels, interpolated linearly between the two
levels around the crossing, in copy share and in reference tokens/pass alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from simulator.errors import InputError

SPEED_KEY = "run_per_session_tok_s"      # whole run: a short point has no steady window


def copy_levels(text: str) -> list[float]:
    """`0,0.25,1` → the copy shares, each in [0, 1], ascending, no repeats
    (InputError with one line otherwise)."""
    try:
        levels = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--copy: expected comma-separated copy shares in [0, 1], "
                         f"got {text!r}") from None
    if len(levels) < 2:
        raise InputError(f"--copy: a predictability sweep needs two or more levels, got {text!r}")
    if any(not 0.0 <= v <= 1.0 for v in levels):
        raise InputError(f"--copy: copy shares lie in [0, 1], got {text!r}")
    if len(set(levels)) < len(levels):
        raise InputError(f"--copy: a level is listed twice ({text})")
    return sorted(levels)


def copy_overrides(code_edit: Sequence[bool], level: float) -> list[str]:
    """The `--set` overrides that give every code-edit turn template this copy share
    (`repeat_fraction`); InputError when the scenario has none."""
    idx = [i for i, c in enumerate(code_edit) if c]
    if not idx:
        raise InputError("--copy: the scenario has no turn template with code_edit: true, "
                         "so no reply copies its context (mark the editing turns)")
    return [f"turn_templates.{i}.repeat_fraction={level:g}" for i in idx]


def _speed(figures: Mapping[str, Any]) -> float | None:
    v = figures.get(SPEED_KEY, figures.get("per_session_tok_s"))
    return None if v is None else float(v)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


Key = tuple[float, str, int, int]        # (copy level, spec setting, sessions, seed offset)


def copy_rows(figures: Mapping[Key, Mapping[str, Any]], levels: Sequence[float],
              specs: Sequence[str], counts: Sequence[int],
              repeats: int) -> list[dict[str, Any]]:
    """One row per (N, level, setting other than the first): the setting's and the
    first setting's speed, the per-seed ratios' mean and min–max, and the level's
    measured reference tokens/pass."""
    base = specs[0]
    rows = []
    for n in counts:
        for level in levels:
            refs = [float(f["ngram_reference_tokens_per_pass"])
                    for (lv, _, nn, _), f in figures.items()
                    if lv == level and nn == n
                    and f.get("ngram_reference_tokens_per_pass") is not None]
            for spec in specs[1:]:
                ratios, on, off = [], [], []
                for k in range(repeats):
                    a = _speed(figures[(level, spec, n, k)])
                    b = _speed(figures[(level, base, n, k)])
                    if a is not None:
                        on.append(a)
                    if b is not None:
                        off.append(b)
                    if a is not None and b:
                        ratios.append(a / b)
                rows.append({
                    "sessions": n, "copy": level, "spec": spec, "baseline": base,
                    "replicates": repeats,
                    "reference_tokens_per_pass": _mean(refs),
                    "spec_tok_s": _mean(on), "baseline_tok_s": _mean(off),
                    "ratio": _mean(ratios),
                    "ratio_min": min(ratios) if ratios else None,
                    "ratio_max": max(ratios) if ratios else None,
                    "simulated": any(bool(figures[(level, s, n, k)].get("simulated"))
                                     for s in specs for k in range(repeats)),
                })
    return rows


def break_even(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (N, setting): the copy share (and reference tokens/pass) where the mean
    ratio first reaches 1 going up the levels. `kind` says how it was found:
    "interpolated" between two measured levels, "below" (pays at the lowest level
    measured), "above" (never pays up to the highest), or "unknown" (no ratio)."""
    out = []
    for n in dict.fromkeys(r["sessions"] for r in rows):
        for spec in dict.fromkeys(r["spec"] for r in rows):
            pts = [r for r in rows if r["sessions"] == n and r["spec"] == spec
                   and r["ratio"] is not None]
            entry: dict[str, Any] = {"sessions": n, "spec": spec, "copy": None,
                                     "reference_tokens_per_pass": None}
            if not pts:
                out.append(entry | {"kind": "unknown"})
                continue
            if pts[0]["ratio"] >= 1.0:
                out.append(entry | {"kind": "below", "copy": pts[0]["copy"],
                                    "reference_tokens_per_pass":
                                        pts[0]["reference_tokens_per_pass"]})
                continue
            for lo, hi in pairwise(pts):
                if lo["ratio"] < 1.0 <= hi["ratio"]:
                    w = (1.0 - lo["ratio"]) / (hi["ratio"] - lo["ratio"])
                    ref = None
                    if lo["reference_tokens_per_pass"] is not None \
                            and hi["reference_tokens_per_pass"] is not None:
                        ref = lo["reference_tokens_per_pass"] + w * (
                            hi["reference_tokens_per_pass"] - lo["reference_tokens_per_pass"])
                    out.append(entry | {"kind": "interpolated",
                                        "copy": lo["copy"] + w * (hi["copy"] - lo["copy"]),
                                        "reference_tokens_per_pass": ref,
                                        "between": [lo["copy"], hi["copy"]]})
                    break
            else:
                out.append(entry | {"kind": "above", "copy": pts[-1]["copy"],
                                    "reference_tokens_per_pass":
                                        pts[-1]["reference_tokens_per_pass"]})
    return out


def _f(v: Any, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(float(v), fmt)


def format_break_even(b: Mapping[str, Any]) -> str:
    """One line: where `spec` starts to pay for N sessions, and how that was found."""
    head = f"{b['sessions']} session{'s' if b['sessions'] != 1 else ''}, {b['spec']}"
    ref = _f(b.get("reference_tokens_per_pass"))
    if b["kind"] == "interpolated":
        lo, hi = b["between"]
        return (f"{head}: pays from copy ≈ {b['copy']:.2f} (reference ≈ {ref} tok/pass), "
                f"interpolated between the levels {lo:g} and {hi:g}")
    if b["kind"] == "below":
        return (f"{head}: pays at every level measured, from copy {b['copy']:g} "
                f"(reference {ref} tok/pass) up")
    if b["kind"] == "above":
        return (f"{head}: does not pay at any level measured, up to copy {b['copy']:g} "
                f"(reference {ref} tok/pass)")
    return f"{head}: no speed measured"


def format_copy_table(rows: Sequence[dict[str, Any]]) -> str:
    """Terminal table: per N and level, the reference tokens/pass, each speed, the
    ratio (min–max over seeds); then one break-even line per (N, setting)."""
    sim = any(r.get("simulated") for r in rows)
    head = ["sessions", "copy", "reference tok/pass", "setting", "setting tok/s",
            "baseline tok/s", "ratio (min–max)"]
    table = [head]
    for r in rows:
        span = "" if r["replicates"] < 2 or r["ratio_min"] is None else \
            f" ({r['ratio_min']:.2f}–{r['ratio_max']:.2f})"
        table.append([str(r["sessions"]), f"{r['copy']:g}", _f(r["reference_tokens_per_pass"]),
                      r["spec"], _f(r["spec_tok_s"], ",.1f"),
                      _f(r["baseline_tok_s"], ",.1f"),
                      ("n/a" if r["ratio"] is None else f"{r['ratio']:.2f}×") + span])
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(t, widths, strict=True)) for t in table]
    base = rows[0]["baseline"] if rows else "?"
    reps = rows[0]["replicates"] if rows else 0
    title = (f"speculation by copy share (vs {base}) — "
             + ("SIMULATED (twin)" if sim else "real endpoint"))
    notes = [f"ratio: setting ÷ {base} sustained per-session tok/s (whole run), per seed, "
             f"mean over {reps} seed{'s' if reps != 1 else ''}; copy: the code-edit turns' "
             "repeat_fraction; reference tok/pass: what ngram:24 would see, measured in "
             "the level's runs",
             *[format_break_even(b) for b in break_even(rows)]]
    return "\n".join([title, *lines, *notes])


def plot_copy(rows: Sequence[dict[str, Any]]) -> Any:
    """Speed ratio against the measured reference tokens/pass, one line per (N,
    setting), min–max over seeds as error bars, the break-even line at 1×."""
    from simulator.analysis import plots
    fig = plots.new_figure(8.0, 4.8)
    ax = fig.add_subplot()
    series = list(dict.fromkeys((r["sessions"], r["spec"]) for r in rows))
    for i, (n, spec) in enumerate(series):
        pts = [r for r in rows if (r["sessions"], r["spec"]) == (n, spec)
               and r["ratio"] is not None]
        x = [r["reference_tokens_per_pass"] if r["reference_tokens_per_pass"] is not None
             else float("nan") for r in pts]
        y = [r["ratio"] for r in pts]
        err = [[r["ratio"] - r["ratio_min"] for r in pts], [r["ratio_max"] - r["ratio"] for r in pts]]
        ax.errorbar(x, y, yerr=err, fmt="o-", capsize=3, color=f"C{i % 10}",
                    label=f"{n} session{'s' if n != 1 else ''}, {spec}")
        for r, xv in zip(pts, x, strict=True):
            ax.annotate(f"{r['copy']:g}", (xv, r["ratio"]), textcoords="offset points",
                        xytext=(4, -10), fontsize="x-small", color=f"C{i % 10}")
    ax.axhline(1.0, color="grey", ls="--", alpha=0.7)
    base = rows[0]["baseline"] if rows else "?"
    sim = any(r.get("simulated") for r in rows)
    ax.set(title=f"Where speculation pays — {plots.mode_word(sim)}",
           xlabel="reference tokens per pass (ngram:24; labels: copy share)",
           ylabel=f"speed ÷ {base} (per-session tok/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    plots.legend_below(fig, ax, ncol=3)
    return fig


def write_copy_plot(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Save the plot as PNG; returns its path."""
    from simulator.analysis.render import figure_png
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(figure_png(plot_copy(rows)))
    return p
