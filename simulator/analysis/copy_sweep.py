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
from typing import Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on 3.11

from simulator.analysis.metric_keys import figure
from simulator.analysis.run_summary import Summary, record_of
from simulator.errors import InputError

SPEED_KEY: Literal["per_session_tok_s"] = "per_session_tok_s"   # the whole run's: a short
#                                                                  point has no steady window


@with_config(ConfigDict(extra="allow"))
class CopyRow(TypedDict):
    """One (N, copy level, setting) of a copy sweep, as copy-sweep.json keeps it."""

    requested_sessions: int
    copy: float
    spec: str
    baseline: str
    replicates: int
    reference_tokens_per_pass: float | None
    spec_tok_s: float | None
    baseline_tok_s: float | None
    ratio: float | None
    ratio_min: float | None
    ratio_max: float | None
    simulated: bool
    run_dirs: NotRequired[list[str]]


_COPY_ROWS = TypeAdapter(list[CopyRow])


def read_copy_rows(rows: Sequence[Mapping[str, object]]) -> list[CopyRow]:
    """copy-sweep.json's rows (or the ones the sweep is writing) as typed records,
    checked by pydantic (a key the record does not name is kept)."""
    return _COPY_ROWS.validate_python(list(rows))


class BreakEven(TypedDict):
    """Where a setting starts to pay for N sessions, and how that was found."""

    requested_sessions: int
    spec: str
    copy: float | None
    reference_tokens_per_pass: float | None
    kind: str                        # interpolated | below | above | unknown
    between: NotRequired[list[float]]


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


def _speed(figures: Summary) -> float | None:
    v = record_of(figures).get(SPEED_KEY)
    return None if v is None else float(v)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


Key = tuple[float, str, int, int]        # (copy level, spec setting, sessions, seed offset)


def copy_rows(figures: Mapping[Key, Summary], levels: Sequence[float],
              specs: Sequence[str], counts: Sequence[int],
              repeats: int) -> list[CopyRow]:
    """One row per (N, level, setting other than the first): the setting's and the
    first setting's speed, the per-seed ratios' mean and min–max, and the level's
    measured reference tokens/pass."""
    base = specs[0]
    rows: list[CopyRow] = []
    for n in counts:
        for level in levels:
            refs = [float(ref) for (lv, _, nn, _), f in figures.items()
                    if lv == level and nn == n
                    and (ref := figure(record_of(f), "ngram_reference_tokens_per_pass")) is not None]
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
                    "requested_sessions": n, "copy": level, "spec": spec, "baseline": base,
                    "replicates": repeats,
                    "reference_tokens_per_pass": _mean(refs),
                    "spec_tok_s": _mean(on), "baseline_tok_s": _mean(off),
                    "ratio": _mean(ratios),
                    "ratio_min": min(ratios) if ratios else None,
                    "ratio_max": max(ratios) if ratios else None,
                    "simulated": any(bool(record_of(figures[(level, s, n, k)]).get("simulated"))
                                     for s in specs for k in range(repeats)),
                })
    return rows


def break_even(rows: Sequence[CopyRow]) -> list[BreakEven]:
    """Per (N, setting): the copy share (and reference tokens/pass) where the mean
    ratio first reaches 1 going up the levels. `kind` says how it was found:
    "interpolated" between two measured levels, "below" (pays at the lowest level
    measured), "above" (never pays up to the highest), or "unknown" (no ratio)."""
    out: list[BreakEven] = []
    for n in dict.fromkeys(r["requested_sessions"] for r in rows):
        for spec in dict.fromkeys(r["spec"] for r in rows):
            pts = [(r, ratio) for r in rows if r["requested_sessions"] == n
                   and r["spec"] == spec and (ratio := r["ratio"]) is not None]
            entry: BreakEven = {"requested_sessions": n, "spec": spec, "copy": None,
                                "reference_tokens_per_pass": None, "kind": "unknown"}
            if not pts:
                out.append(entry)
                continue
            first, first_ratio = pts[0]
            if first_ratio >= 1.0:
                out.append(entry | {"kind": "below", "copy": first["copy"],
                                    "reference_tokens_per_pass":
                                        first["reference_tokens_per_pass"]})
                continue
            for (lo, lo_ratio), (hi, hi_ratio) in pairwise(pts):
                if lo_ratio < 1.0 <= hi_ratio:
                    w = (1.0 - lo_ratio) / (hi_ratio - lo_ratio)
                    ref = None
                    lo_ref, hi_ref = lo["reference_tokens_per_pass"], hi["reference_tokens_per_pass"]
                    if lo_ref is not None and hi_ref is not None:
                        ref = lo_ref + w * (hi_ref - lo_ref)
                    out.append(entry | {"kind": "interpolated",
                                        "copy": lo["copy"] + w * (hi["copy"] - lo["copy"]),
                                        "reference_tokens_per_pass": ref,
                                        "between": [lo["copy"], hi["copy"]]})
                    break
            else:
                last = pts[-1][0]
                out.append(entry | {"kind": "above", "copy": last["copy"],
                                    "reference_tokens_per_pass":
                                        last["reference_tokens_per_pass"]})
    return out


