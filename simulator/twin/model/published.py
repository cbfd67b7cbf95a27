"""Published vLLM measurements (`benchmarks/data/published/*.csv` + `sources.yaml`) as bench
observations, grouped by card × model × weight format × engine settings (issue 56).

A row is one `vllm bench serve`-shaped run (fixed input/output lengths, a closed loop of C
or a request rate); each figure it publishes (TTFT mean/p50, TPOT mean/p50, ITL mean, E2E
mean, output tok/s) becomes one `Observation(kind="bench")`. The twin runs the same load
(`twin.bench.closed_loop`) on the card with the row's engine settings; settings a source
does not publish are vLLM's defaults for that card (`vllm_serve_defaults`).

Rows the twin cannot run are skipped with the reason: no twin model profile, a weight
format the model profile lacks, data or expert parallelism (the twin runs one engine of
`tp` cards), a card with no profile. The split (in or out of sample) is a whole source's,
stated in sources.yaml before any fit. A source whose client drew its lengths in a range says
so in sources.yaml (`lengths`): the twin draws its matching rows' lengths the same way
(`LengthRule`), the CSV keeping the nominal ones. A source whose client is known to send a number of requests
per unit of concurrency that the CSV does not state says so too (`prompts`): its matching
closed-loop rows are run with that many requests (`PromptRule`), not the default few waves.
A source whose client queues one request per fixed tick, and lets at most C run, says so
(`arrivals`): its matching rows are run at that rate, evenly spaced, under the cap
(`ArrivalRule`), not all at once. A source whose client times its first token at the
first chunk with text says so (`first_text`): its matching rows are timed from their
model's first token with text (`FirstTextRule`; gpt-oss's chat stream opens with three
tokens that carry none), not the first token.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from simulator.errors import InputError
from simulator.twin.bench.closed_loop import MAX_PROMPTS, BenchLoad
from simulator.twin.model.fit import Observation
from simulator.twin.model.point_checks import BenchMetric
from simulator.twin.model.profiles import (
    HardwareProfile,
    kernel_family,
    known_names,
    load_hardware,
    load_model,
)
from simulator.util.bounded import text_file
from simulator.util.jsontypes import JSONObject, as_object

MAX_CSV_BYTES = 16 << 20
Split = Literal["in_sample", "out_of_sample"]
_SPLITS: tuple[Split, ...] = ("in_sample", "out_of_sample")
_Rule = TypeVar("_Rule")
# CSV column (ms or tok/s) → the bench metric it measures
COLUMNS: dict[str, BenchMetric] = {
    "ttft_mean_ms": "ttft_mean", "ttft_p50_ms": "ttft_p50", "tpot_mean_ms": "tpot_mean",
    "tpot_p50_ms": "tpot_p50", "itl_mean_ms": "itl_mean", "e2el_mean_ms": "e2e_mean",
    "output_tok_s": "output_tok_s"}
# a row's weight format → the model profile's quantization key
QUANT_KEYS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "w4a16": "awq", "awq": "awq",
              "mxfp4": "mxfp4", "nvfp4": "nvfp4"}
# requests a closed-loop row ran when the source does not say: a few waves of C, so the
# first wave's lock-step start weighs what it weighs in a run of a few minutes
WAVES = 4
MIN_PROMPTS = 16


class _NotesRule:
    """A sources.yaml rule that names its rows by a regular expression on their notes."""

    __slots__ = ()
    rows: re.Pattern[str]

    def applies(self, notes: str) -> bool:
        return self.rows.search(notes) is not None


@dataclass(frozen=True, slots=True)
class LengthRule(_NotesRule):
    """A source's client drew each length uniformly from the integers in
    [int(low_ratio × n), n] for the nominal n (vLLM's `benchmark_serving.py` before its ±r
    form, InferenceX's copy, `--random-range-ratio`): the rows whose notes match `rows` are
    run with the same draw. Not at the draw's mean: with every reply of one length a
    closed loop stays in lock-step waves, each arrival queued behind C prefills, which the
    measured server never saw."""

    low_ratio: float
    rows: re.Pattern[str]

    def bounds(self, n: int) -> tuple[int, int]:
        """The draw's smallest and largest length for a nominal n (1024 → 819, 1024)."""
        return max(1, int(n * self.low_ratio)), n


@dataclass(frozen=True, slots=True)
class PromptRule(_NotesRule):
    """A source's client sends `per_concurrency` × C requests in a closed loop of C (InferenceX:
    `--num-prompts CONC*10`), which its CSV does not state: the rows whose notes match `rows`
    are repeated with that count, since the first lock-step wave weighs 1/waves of a run."""

    per_concurrency: int
    rows: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class ArrivalRule(_NotesRule):
    """A source's client queues one request every `interval_s` and runs at most C of
    them (a worker pool behind a semaphore; its timer starts when a worker takes the
    request), which its CSV's concurrency column does not say: the rows whose notes match
    `rows` are run at 1/interval_s req/s, evenly spaced (burstiness inf), under the cap.
    Run all at once instead, C requests of one length stay in lock-step waves, each
    queued behind C − 1 prefills, which the measured server never saw."""

    interval_s: float
    rows: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class FirstTextRule(_NotesRule):
    """A source's client times its first token at the first streamed chunk with text, not
    at the first chunk (vLLM's client): the rows whose notes match `rows` are timed from
    their model's first token with text (`ModelProfile.chat_first_text_token`: gpt-oss's
    harmony header `<|channel|>analysis<|message|>` streams none, so its 4th)."""

    rows: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class FitRule(_NotesRule):
    """Which of a source's rows a fit may use: those whose notes match `rows`, the rows whose
    load as run (client, length draw, request count) the source names. The others are
    scored, never fitted: the twin cannot repeat a load nobody wrote down, and one such row
    at +400% weighs in a least-squares fit as much as dozens near 10%."""

    rows: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class PublishedRow:
    """One published run, as the twin will repeat it."""

    source_id: str
    split: Split
    card: str
    tp: int
    model: str                  # the Hugging Face id as published
    twin_model: str
    quantization: str
    kv_dtype: str               # "" : vLLM's auto
    vllm_version: str
    input_tokens: int
    output_tokens: int
    concurrency: int | None
    request_rate: float | None
    num_prompts: int
    num_prompts_stated: bool
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    figures: dict[BenchMetric, float] = field(default_factory=dict)   # s or tok/s
    line: int = 0
    low_ratio: float = 0.0       # lengths drawn in [int(low_ratio × n), n] (a LengthRule)
    prompts_rule: bool = False   # num_prompts set by the source's PromptRule, not the default
    burstiness: float = 1.0      # gamma shape of the arrivals at request_rate (inf: a tick)
    fitted: bool = True          # False: its source's FitRule leaves it to scoring only
    first_text: bool = False     # its client timed the first chunk with text (a FirstTextRule)
    first_timed_token: int = 1   # so the token it timed: its model's first with text, or 1

    @property
    def family(self) -> str:
        return kernel_family(load_model(self.twin_model), self.quantization)

    def lengths(self) -> str:
        """Input/output tokens, with the draw where a LengthRule gives one."""
        run = f"{self.input_tokens}/{self.output_tokens}"
        return run if not self.low_ratio else f"{run} (each drawn in [{self.low_ratio:g} n, n])"

    @property
    def tick_s(self) -> float | None:
        """Seconds between arrivals when its client sends one per tick (an ArrivalRule)."""
        return 1 / self.request_rate if self.request_rate and math.isinf(self.burstiness) \
            else None

    def label(self) -> str:
        tick = self.tick_s
        rate = (f" every {tick:g} s" if tick else f" {self.request_rate:g} req/s"
                ) if self.request_rate else ""
        load = (f"C={self.concurrency}{' fed' + rate if rate else ''}"
                if self.concurrency is not None else rate.strip() or "rate inf")
        timed = (f", timed from token {self.first_timed_token}"
                 if self.first_timed_token > 1 else "")
        return (f"{self.source_id}:{self.line} {self.twin_model}:{self.quantization} "
                f"tp{self.tp} {self.lengths()} {load}{timed}")

    def bench_load(self) -> BenchLoad:
        """The `vllm bench serve` run the row measured, as the twin repeats it."""
        return BenchLoad(self.input_tokens, self.output_tokens, self.num_prompts,
                         concurrency=self.concurrency, request_rate=self.request_rate,
                         burstiness=self.burstiness, low_ratio=self.low_ratio,
                         first_timed_token=self.first_timed_token)

    def observations(self) -> list[Observation]:
        return [Observation(kind="bench", measured=v,
                            unit="tok_s" if m == "output_tok_s" else "s",
                            input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                            concurrency=self.concurrency, request_rate=self.request_rate,
                            burstiness=self.burstiness, num_prompts=self.num_prompts, metric=m,
                            length_low_ratio=self.low_ratio,
                            first_text=self.first_text,
                            label=f"{self.label()} {m}")
                for m, v in self.figures.items()]


def vllm_serve_defaults(hw: HardwareProfile) -> dict[str, int]:
    """`vllm serve`'s max_num_seqs and max_num_batched_tokens on this card (vLLM V1,
    `EngineArgs._set_default_args`: 1024 and 8192 on a card of ≥ 70 GiB other than an
    A100, else 256 and 2048)."""
    big = hw.memory_bytes >= 70 * 2**30 and "a100" not in hw.name
    return {"max_num_seqs": 1024 if big else 256,
            "max_num_batched_tokens": 8192 if big else 2048}


def engine_settings(row: PublishedRow) -> dict[str, Any]:
    """The engine settings the twin repeats a row with (published, else vLLM's)."""
    hw, mp = load_hardware(row.card), load_model(row.twin_model)
    eng: dict[str, Any] = vllm_serve_defaults(hw)
    if row.max_num_seqs:
        eng["max_num_seqs"] = row.max_num_seqs
    if row.max_num_batched_tokens:
        eng["max_num_batched_tokens"] = row.max_num_batched_tokens
    kv = row.kv_dtype.lower()
    eng["kv_dtype"] = kv if kv in ("bf16", "fp16", "fp8") else (mp.kv_dtype_default or "bf16")
    eng["tensor_parallel_size"] = row.tp
    eng["spec"] = "off"
    return eng


def _sources(folder: Path) -> tuple[Path, dict[str, JSONObject]]:
    """sources.yaml's `sources`: each source_id with its description ({} where it is not
    a mapping, which every reader then refuses as a missing field)."""
    path = folder / "sources.yaml"
    try:
        data = yaml.safe_load(text_file(path, "sources file", MAX_CSV_BYTES))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict):
        raise InputError(f"{path}: sources: a mapping of source_id to its description")
    return path, {str(sid): as_object(desc) for sid, desc in sources.items()}


def load_splits(folder: Path) -> dict[str, Split]:
    """source_id → its side of the split, from sources.yaml."""
    return _splits(*_sources(folder))


def _splits(path: Path, sources: dict[str, JSONObject]) -> dict[str, Split]:
    out: dict[str, Split] = {}
    for sid, desc in sources.items():
        split = desc.get("split")
        side = next((s for s in _SPLITS if s == split), None)
        if side is None:
            raise InputError(f"{path}: sources.{sid}.split: in_sample or out_of_sample, "
                             f"not {split!r}")
        out[sid] = side
    return out


def load_prompt_rules(folder: Path) -> dict[str, PromptRule]:
    """source_id → its `prompts` rule (`per_concurrency`, `rows`: a regex on a row's notes),
    for the sources whose sources.yaml entry has one."""
    return _rules(*_sources(folder), "prompts", _prompt_rule)


def load_length_rules(folder: Path) -> dict[str, LengthRule]:
    """source_id → its `lengths` rule (`low_ratio`, `rows`: a regex on a row's notes), for
    the sources whose sources.yaml entry has one."""
    return _rules(*_sources(folder), "lengths", _length_rule)


def _rules(path: Path, sources: dict[str, JSONObject], key: str,
           build: Callable[[Mapping[str, object], str], _Rule]) -> dict[str, _Rule]:
    """source_id → its rule under `key`, for the sources that state one (`build` names the
    field it refuses, under `sources.<id>.<key>`)."""
    out: dict[str, _Rule] = {}
    for sid, desc in sources.items():
        spec = desc.get(key)
        if spec is not None:
            out[sid] = build(as_object(spec), f"{path}: sources.{sid}.{key}")
    return out


def _prompt_rule(spec: Mapping[str, object], where: str) -> PromptRule:
    per = spec.get("per_concurrency")
    if isinstance(per, bool) or not isinstance(per, int) or not 1 <= per <= 1000:
        raise InputError(f"{where}.per_concurrency: a whole number in 1..1000, not {per!r}")
    return PromptRule(per, _pattern(spec.get("rows"), f"{where}.rows"))


def load_arrival_rules(folder: Path) -> dict[str, ArrivalRule]:
    """source_id → its `arrivals` rule (`interval_s`, `rows`: a regex on a row's notes),
    for the sources whose sources.yaml entry has one."""
    return _rules(*_sources(folder), "arrivals", _arrival_rule)


def load_first_text_rules(folder: Path) -> dict[str, FirstTextRule]:
    """source_id → its `first_text` rule (`rows`: a regex on a row's notes), for the
    sources whose sources.yaml entry has one."""
    return _rules(*_sources(folder), "first_text", _first_text_rule)


def _arrival_rule(spec: Mapping[str, object], where: str) -> ArrivalRule:
    tick = spec.get("interval_s")
    if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not 1e-3 <= tick <= 3600:
        raise InputError(f"{where}.interval_s: seconds in [0.001, 3600], not {tick!r}")
    return ArrivalRule(float(tick), _pattern(spec.get("rows"), f"{where}.rows"))


def _first_text_rule(spec: Mapping[str, object], where: str) -> FirstTextRule:
    return FirstTextRule(_pattern(spec.get("rows"), f"{where}.rows"))


def _fit_rule(spec: Mapping[str, object], where: str) -> FitRule:
    return FitRule(_pattern(spec.get("rows"), f"{where}.rows"))


def _length_rule(spec: Mapping[str, object], where: str) -> LengthRule:
    ratio = spec.get("low_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise InputError(f"{where}.low_ratio: a number in (0, 1], not {ratio!r}")
    return LengthRule(float(ratio), _pattern(spec.get("rows"), f"{where}.rows"))


def _pattern(rows: object, where: str) -> re.Pattern[str]:
    if not isinstance(rows, str) or not rows:
        raise InputError(f"{where}: a regular expression on a row's notes")
    try:
        return re.compile(rows)
    except re.error as exc:
        raise InputError(f"{where}: not a regular expression ({exc})") from None


def _int(row: Mapping[str, str], key: str, where: str) -> int | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {key}: not a number ({text[:40]!r})") from None
    if value != int(value) or not 0 <= value <= 1e9:
        raise InputError(f"{where}: {key}: a whole number in 0..1e9, not {text[:40]!r}")
    return int(value)


def _float(row: Mapping[str, str], key: str, where: str) -> float | None:
    text = (row.get(key) or "").strip()
    if not text or text.lower() == "inf":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {key}: not a number ({text[:40]!r})") from None
    if not 0 < value < 1e12:
        raise InputError(f"{where}: {key}: a finite number > 0, not {text[:40]!r}")
    return value


@dataclass(frozen=True, slots=True)
class SourceRules:
    """A source's sources.yaml rules for how its client ran the rows (None: it states none):
    drawn lengths, the unstated request count, the rows a fit may use, a fixed tick, and a
    first token timed at the first chunk with text."""

    lengths: LengthRule | None = None
    prompts: PromptRule | None = None
    fit: FitRule | None = None
    arrivals: ArrivalRule | None = None
    first_text: FirstTextRule | None = None


def parse_row(row: Mapping[str, str], split: Split, where: str, line: int,
              rules: SourceRules = SourceRules()) -> PublishedRow | str:
    """The row as the twin repeats it, or why it cannot (a one-line reason), under its
    source's `rules`."""
    card, twin = (row.get("card") or "").strip(), (row.get("twin_model") or "").strip()
    if card not in known_names("hardware"):
        return f"no hardware profile {card!r}"
    if not twin:
        return f"no twin model profile for {row.get('model', '')!r}"
    if twin not in known_names("models"):
        return f"unknown twin model {twin!r}"
    fmt = (row.get("weight_format") or "").strip().lower()
    quant = QUANT_KEYS.get(fmt, fmt)
    profile = load_model(twin)
    if quant not in profile.quantizations:
        return f"{twin} has no {fmt or 'stated'} weights in its profile"
    tp = _int(row, "tp", where) or 1
    gpus = _int(row, "gpus", where) or tp
    if gpus != tp or (_int(row, "ep", where) or 0):
        return "data or expert parallelism (the twin runs one engine of tp cards)"
    isl, osl = _int(row, "input_tokens", where), _int(row, "output_tokens", where)
    if not isl or not osl:
        return "no input or output length"
    notes = row.get("notes") or ""
    first_text = rules.first_text is not None and rules.first_text.applies(notes)
    low = rules.lengths.low_ratio if rules.lengths and rules.lengths.applies(notes) else 0.0
    conc = _int(row, "concurrency", where) or None
    rate = _float(row, "request_rate", where)
    burstiness = 1.0
    arrivals = rules.arrivals
    if arrivals is not None and arrivals.applies(notes):
        if rate is not None:
            raise InputError(f"{where}: request_rate {rate:g} and its source's arrivals rule "
                             "(one request per tick) are two loads; give one")
        rate, burstiness = 1.0 / arrivals.interval_s, float("inf")
    stated = _int(row, "num_prompts", where)
    prompts = rules.prompts
    per = (prompts.per_concurrency if prompts is not None and stated is None
           and prompts.applies(notes) else None)
    by_rule = per is not None and conc is not None
    n = stated or (per * conc if per is not None and conc is not None
                   else max(MIN_PROMPTS, WAVES * (conc or 1)))
    if n > MAX_PROMPTS:
        return f"more requests than the twin repeats in one run ({MAX_PROMPTS:,})"
    figures: dict[BenchMetric, float] = {}
    for col, metric in COLUMNS.items():
        v = _float(row, col, where)
        if v is not None and not (metric.startswith("tpot") and osl < 2):
            figures[metric] = v if metric == "output_tok_s" else v / 1000.0
    if not figures:
        return "no figure published"
    return PublishedRow(
        source_id=(row.get("source_id") or "").strip(), split=split, card=card, tp=tp,
        model=(row.get("model") or "").strip(), twin_model=twin, quantization=quant,
        kv_dtype=(row.get("kv_dtype") or "").strip(),
        vllm_version=(row.get("vllm_version") or "").strip(), input_tokens=isl,
        output_tokens=osl, concurrency=conc, request_rate=rate, num_prompts=n,
        num_prompts_stated=stated is not None,
        max_num_seqs=_int(row, "max_num_seqs", where) or None,
        max_num_batched_tokens=_int(row, "max_num_batched_tokens", where) or None,
        figures=figures, line=line, low_ratio=low, prompts_rule=by_rule,
        burstiness=burstiness, fitted=rules.fit is None or rules.fit.applies(notes),
        first_text=first_text,
        first_timed_token=profile.chat_first_text_token if first_text else 1)


@dataclass(frozen=True, slots=True)
class Published:
    rows: tuple[PublishedRow, ...]
    skipped: dict[str, int]          # reason → rows


def load_published(folder: str | Path) -> Published:
    """Every row of the folder's CSVs the twin can repeat, and counts of the rest."""
    base = Path(folder)
    sources = _sources(base)            # read once: the split and the length rules
    splits = _splits(*sources)
    lengths = _rules(*sources, "lengths", _length_rule)
    prompts = _rules(*sources, "prompts", _prompt_rule)
    fits = _rules(*sources, "fit", _fit_rule)
    arrivals = _rules(*sources, "arrivals", _arrival_rule)
    first_text = _rules(*sources, "first_text", _first_text_rule)
    rules = {sid: SourceRules(lengths.get(sid), prompts.get(sid), fits.get(sid),
                              arrivals.get(sid), first_text.get(sid)) for sid in splits}
    rows: list[PublishedRow] = []
    skipped: dict[str, int] = {}
    for path in sorted(base.glob("*.csv")):
        text = text_file(path, "published CSV", MAX_CSV_BYTES)
        try:
            records = list(csv.DictReader(text.splitlines()))
        except csv.Error as exc:
            raise InputError(f"{path}: not a CSV ({exc})") from None
        for i, rec in enumerate(records, start=2):
            sid = (rec.get("source_id") or "").strip()
            where = f"{path.name}:{i}"
            if sid not in splits:
                raise InputError(f"{where}: source_id {sid!r} is not in sources.yaml")
            got = parse_row(rec, splits[sid], where, i, rules[sid])
            if isinstance(got, str):
                skipped[got] = skipped.get(got, 0) + 1
            else:
                rows.append(got)
    return Published(tuple(rows), skipped)


GroupKey = tuple[str, str, str, tuple[tuple[str, Any], ...]]


def one_per_measurement(rows: Iterable[PublishedRow]) -> list[PublishedRow]:
    """The rows with each measurement once: a row whose card, model, weights, engine
    settings, load as run and every figure equal an earlier row's is that row listed again
    (aiconfigurator lists some runs in its db dump and in a dated CSV, with the same date,
    image and figures to the last digit), and would weigh double in a fit."""
    seen: set[tuple[object, ...]] = set()
    out: list[PublishedRow] = []
    for r in rows:
        key = (r.card, r.twin_model, r.quantization, tuple(sorted(engine_settings(r).items())),
               r.bench_load(), tuple(sorted(r.figures.items())))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def groups(rows: Iterable[PublishedRow]) -> dict[GroupKey, list[PublishedRow]]:
    """Rows by card × twin model × weight format × engine settings: one perf model each."""
    out: dict[GroupKey, list[PublishedRow]] = {}
    for r in rows:
        key = (r.card, r.twin_model, r.quantization, tuple(sorted(engine_settings(r).items())))
        out.setdefault(key, []).append(r)
    return out
