"""The twin of each GPU card against published vLLM measurements, in and out of sample.

Run: `python benchmarks/card_fidelity.py [--fit] [--cards h100,h200] [--no-before]`.

Reads `benchmarks/data/published/*.csv` and `sources.yaml` (issue 56, interface A): every
row the twin can repeat (`twin.model.published`) becomes `vllm bench serve`-shaped
observations, run on the twin (`twin.bench.closed_loop`). The split is by whole source,
stated in sources.yaml before any fit. With `--fit` each card's terms and its kernel
families' terms are fitted (`twin.model.card_fit`) on the IN-SAMPLE rows only (those of
at most `FIT_MAX_OUTPUT` output tokens, at concurrencies in `FIT_CONCURRENCY`, on the
smallest and largest tensor-parallel size, for time: each prediction is a simulated
benchmark) and written into the hardware profiles;
without it the shipped profiles are evaluated. Either way it prints and writes the
validation table (docs/twin-fidelity.md, between the markers) with, per row, the error
of TTFT p50, TTFT mean and TPOT mean and the vLLM version, MAE per card and metric in
and out of sample (pooled and per source), and the "before" figures with the borrowed a40 terms; and it writes
the out-of-sample MAE per card to `benchmarks/data/card_fidelity.json`, which
tests/benchmarks/test_card_fidelity.py holds the profiles to.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulator.errors import InputError  # noqa: E402
from simulator.twin.model.card_fit import CardFit, FitGroup, fit_card, perf_for  # noqa: E402
from simulator.twin.model.fit import BenchRuns, predict  # noqa: E402
from simulator.twin.model.perf_model import RooflinePerfModel, build_perf_model  # noqa: E402
from simulator.twin.model.profiles import (  # noqa: E402
    PROFILE_DIR,
    HardwareProfile,
    load_hardware,
)
from simulator.twin.model.published import (  # noqa: E402
    PublishedRow,
    engine_settings,
    groups,
    load_published,
    one_per_measurement,
)

DATA = ROOT / "benchmarks" / "data" / "published"
RECORD = ROOT / "benchmarks" / "data" / "card_fidelity.json"
DOC = ROOT / "docs" / "twin-fidelity.md"
BEGIN, END = "<!-- card-fidelity:begin -->", "<!-- card-fidelity:end -->"
CARDS = ("h100", "h200", "b200", "a100-80gb", "l40s", "mi300x")
METRICS = ("ttft_p50", "ttft_mean", "tpot_mean")
FIT_MAX_OUTPUT = 1024
FIT_CONCURRENCY = frozenset({4, 64})


@dataclass(frozen=True, slots=True)
class Scored:
    row: PublishedRow
    errors: dict[str, float]        # metric → % error (twin / measured − 1)


def twin_for(row: PublishedRow, borrowed: bool) -> RooflinePerfModel:
    """The twin of a row's card and model: the shipped profile, or (`borrowed`) the
    card with no terms of its own (what it ran on before issue 56)."""
    eng = engine_settings(row)
    name = f"{row.twin_model}:{row.quantization}"
    if not borrowed:
        return build_perf_model(row.card, name, overrides=eng)
    hw = load_hardware(row.card).model_copy(update={"card_terms": None, "families": {}})
    group = FitGroup(row.twin_model, row.quantization, eng, ())
    return perf_for(hw, group, {}, {})


def score(rows: Sequence[PublishedRow], borrowed: bool = False) -> list[Scored]:
    """Each row's errors on the metrics it publishes (one twin run per row)."""
    out: list[Scored] = []
    for r in rows:
        runs: BenchRuns = {}
        errs = {}
        try:
            pm = twin_for(r, borrowed)
            for o in r.observations():
                if o.metric in METRICS:
                    errs[str(o.metric)] = 100.0 * (predict(pm, o, bench=runs)
                                                   / o.measured - 1.0)
        except InputError as exc:     # a request past the twin's KV cache: said, not scored
            print(f"  {r.label()}: not scored ({exc})")
            continue
        out.append(Scored(r, errs))
    return out


def mae(scored: Sequence[Scored], metric: str) -> float | None:
    vals = [abs(s.errors[metric]) for s in scored if metric in s.errors]
    return statistics.fmean(vals) if vals else None


def mae_by_source(scored: Sequence[Scored]) -> dict[tuple[str, str], dict[str, float | None]]:
    """(split, source_id) → MAE per metric and the row count: the pooled figure of a card
    hides which source carries its error."""
    keys = sorted({(s.row.split, s.row.source_id) for s in scored})
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for split, sid in keys:
        part = [s for s in scored if s.row.split == split and s.row.source_id == sid]
        out[(split, sid)] = {m: mae(part, m) for m in METRICS}
        out[(split, sid)]["rows"] = len(part)
    return out


def _runs(row: PublishedRow) -> bool:
    """Whether the twin can be built for the row (b200 at TP8 holds more KV blocks than
    the twin models): a row it cannot is said and left out of the fit."""
    try:
        twin_for(row, borrowed=True)
    except InputError as exc:
        print(f"  {row.label()}: left out of the fit ({exc})")
        return False
    return True


def fit_one(card: str, rows: Sequence[PublishedRow]) -> CardFit | None:
    """Fit the card's and its families' terms on its in-sample rows (the fit subset)."""
    ins = one_per_measurement(r for r in rows
                              if r.split == "in_sample" and r.fitted and _runs(r))
    if not ins:
        return None
    tps: dict[str, set[int]] = {}
    for r in ins:
        got = tps.setdefault(r.twin_model, {r.tp})
        tps[r.twin_model] = {min(*got, r.tp), max(*got, r.tp)}
    chosen = [r for r in ins if r.output_tokens <= FIT_MAX_OUTPUT
              and r.concurrency in FIT_CONCURRENCY and r.tp in tps[r.twin_model]]
    if not chosen:
        return None
    hw = load_hardware(card).model_copy(update={"card_terms": None, "families": {}})
    fit_groups = [FitGroup(k[1], k[2], dict(k[3]),
                           tuple(o for r in g for o in r.observations()
                                 if o.metric in ("ttft_mean", "tpot_mean", "ttft_p50")))
                  for k, g in groups(chosen).items()]
    return fit_card(hw, fit_groups)


def write_profile(card: str, fit: CardFit, rows: Sequence[PublishedRow],
                  sources: str) -> None:
    """The fitted terms into the card's YAML (after the rest of the file, replacing a
    previous fit's block)."""
    path = PROFILE_DIR / "hardware" / f"{card}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"\n# --- issue 56 fit.*", "", text, flags=re.S).rstrip("\n")
    text = text.replace("# efficiency: not fitted on this card; the twin uses the a40 fit "
                        "(see describe()[\"efficiency_source\"])\n", "")
    fitted_rows = [r for r in rows if r.split == "in_sample" and r.fitted]
    scored_only = sum(1 for r in rows if r.split == "in_sample" and not r.fitted)
    twice = len(fitted_rows) - len(one_per_measurement(fitted_rows))
    versions = sorted({r.vllm_version or "unstated" for r in fitted_rows})
    models = sorted({f"{r.model} ({r.quantization}, tp{r.tp})" for r in fitted_rows})
    where = (f"`python benchmarks/card_fidelity.py --fit` on {sources}; in-sample rows "
             f"only ({len(fitted_rows)} rows"
             + (f", not the {scored_only} whose load the source does not name (its fit "
                "rule)" if scored_only else "")
             + (f"; {twice} listed twice by the source fitted once" if twice else "")
             + f"; fit subset: output <= {FIT_MAX_OUTPUT} tokens, "
             f"concurrency in {sorted(FIT_CONCURRENCY)}, the smallest and largest tp); "
             f"vLLM {', '.join(versions)}; "
             f"models {', '.join(models)}; engine settings unpublished, taken as vLLM's "
             "defaults for the card (twin.model.published.vllm_serve_defaults), KV cache "
             "dtype auto; RMS log error "
             f"{100 * fit.rms_log_error:.1f}%")
    lines = ["", "# --- issue 56 fit (benchmarks/card_fidelity.py --fit writes this block)",
             "card_terms:"]
    lines += [f"  {k}: {v:.5g}" for k, v in fit.card.items()]
    lines += [f"  source: >-\n    {where}", "families:"]
    for fam, terms in fit.families.items():
        lines.append(f"  {fam}:")
        lines += [f"    {k}: {v:.5g}" for k, v in terms.items()]
        lines.append(f"    source: >-\n      {where}")
    path.write_text(text + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    load_hardware(str(path))          # refuses a profile it cannot read


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:+.0f}%"


def _mae(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}%"


def card_section(card: str, after: Sequence[Scored], before: Sequence[Scored] | None,
                 hw: HardwareProfile) -> str:
    """The card's table: MAE in and out of sample (after, before) and every row."""
    label = build_perf_model(card, "llama-3.1-8b:fp8").efficiency_source
    out = [f"### {card}", "", f"Terms: {label[:400]}{'…' if len(label) > 400 else ''}", ""]
    out += ["| sample | rows | MAE TTFT p50 | MAE TTFT mean | MAE TPOT mean |"
            " before: TTFT p50 | before: TTFT mean | before: TPOT mean |",
            "|---|---|---|---|---|---|---|---|"]
    for side in ("in_sample", "out_of_sample"):
        a = [s for s in after if s.row.split == side]
        b = [s for s in before or () if s.row.split == side]
        if not a:
            continue
        out.append(f"| {side.replace('_', ' ')} | {len(a)} | "
                   + " | ".join(_mae(mae(a, m)) for m in METRICS) + " | "
                   + " | ".join(_mae(mae(b, m)) if before else "—" for m in METRICS) + " |")
    out += ["", "| sample | source | rows | MAE TTFT p50 | MAE TTFT mean | MAE TPOT mean |",
            "|---|---|---|---|---|---|"]
    for (split, sid), figs in mae_by_source(after).items():
        out.append(f"| {split.replace('_', ' ')} | {sid} | {figs['rows']:.0f} | "
                   + " | ".join(_mae(figs[m]) for m in METRICS) + " |")
    out += ["", "| sample | source | model | tp | ISL/OSL | load | vLLM | TTFT p50 | "
            "TTFT mean | TPOT mean |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in sorted(after, key=lambda s: (s.row.split, s.row.source_id, s.row.twin_model,
                                          s.row.tp, s.row.input_tokens, s.row.output_tokens,
                                          s.row.concurrency or 0)):
        r = s.row
        tick = "" if not (r.request_rate and r.concurrency) else (
            f", one per {r.tick_s:g} s" if r.tick_s else f", {r.request_rate:g}/s")
        load = f"C={r.concurrency}, {r.num_prompts} req{tick}" if r.concurrency else (
            f"{r.request_rate:g}/s" if r.request_rate else "all at once")
        out.append(f"| {'in' if r.split == 'in_sample' else 'out'} | {r.source_id} | "
                   f"{r.twin_model}:{r.quantization} | {r.tp} | {r.lengths()} | "
                   f"{load} | {r.vllm_version or '?'} | "
                   + " | ".join(_fmt(s.errors.get(m)) for m in METRICS) + " |")
    del hw
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the cards' terms first")
    ap.add_argument("--cards", default=",".join(CARDS))
    ap.add_argument("--no-before", action="store_true",
                    help="skip the figures with the borrowed a40 terms")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--out-of-sample-only", action="store_true",
                    help="score only the out-of-sample rows (fast)")
    args = ap.parse_args(argv)
    pub = load_published(DATA)
    cards = [c for c in args.cards.split(",") if c]
    figures: dict[str, dict[str, object]] = {}
    sections = {}
    for card in cards:
        rows = [r for r in pub.rows if r.card == card]
        if not rows:
            print(f"{card}: no published row the twin can repeat")
            continue
        t = time.time()
        if args.fit:
            fit = fit_one(card, rows)
            if fit is not None:
                write_profile(card, fit, rows, "benchmarks/data/published (sources.yaml: "
                              + ", ".join(sorted({r.source_id for r in rows
                                                  if r.split == 'in_sample'})) + ")")
                print(f"{card}: fitted {fit.card} {fit.families} "
                      f"(RMS log {100 * fit.rms_log_error:.1f}%, {fit.iterations} it, "
                      f"{time.time() - t:.0f} s)")
        shown = [r for r in rows if r.split == "out_of_sample"] if args.out_of_sample_only \
            else rows
        after = score(shown)
        before = None if args.no_before else score(shown, borrowed=True)
        hw = load_hardware(card)
        sections[card] = card_section(card, after, before, hw)
        print(sections[card])
        oos = [s for s in after if s.row.split == "out_of_sample"]
        figures[card] = {m: mae(oos, m) for m in METRICS}
        figures[card]["rows_out_of_sample"] = len(oos)
        figures[card]["out_of_sample_by_source"] = {
            sid: figs for (split, sid), figs in mae_by_source(oos).items()}
        print(f"{card}: {len(rows)} rows, {time.time() - t:.0f} s")
    if args.no_write:
        return 0
    # read at the end, not the start: runs of other cards may have written it meanwhile
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    record.update(figures)
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    doc = DOC.read_text(encoding="utf-8")
    skipped = "; ".join(f"{n} rows: {why}" for why, n in sorted(pub.skipped.items()))
    DOC.write_text(spliced(doc, merged_block(doc, sections, skipped)), encoding="utf-8")
    return 0


def merged_block(doc: str, sections: Mapping[str, str], skipped: str) -> str:
    """The tables block: this run's card sections over the ones `doc` already has, one
    section per card in CARDS order (a card not run keeps its earlier table)."""
    old: dict[str, str] = {}
    if BEGIN in doc and END in doc:
        body = doc[doc.index(BEGIN) + len(BEGIN):doc.index(END)]
        for part in re.split(r"(?=^### )", body, flags=re.M):
            m = re.match(r"### (\S+)", part)
            if m:
                old[m.group(1)] = part.rstrip("\n") + "\n"
    old.update(sections)
    return "\n".join([BEGIN, "", f"Rows the twin cannot repeat, left out: {skipped}.", "",
                      *[old[c] for c in CARDS if c in old], END])


def spliced(doc: str, block: str) -> str:
    """`doc` with its BEGIN…END block replaced by `block` in place (what follows the
    block — other sections of the page — kept), or `block` appended when it has none."""
    if BEGIN in doc and END in doc:
        return doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    return doc.rstrip("\n") + "\n\n" + block + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
