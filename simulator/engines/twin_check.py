"""The twin of this machine against a real vLLM CPU serving SmolLM2-135M-Instruct.

Fit once, predict without refitting: a one-session run of
`scenarios/calibration/twin-vs-vllm-cpu.yaml` against the real server, through
`endurance run`'s own path, gives the fit points (`twin/model/fit_points.py`); the fitted
terms go into a hardware profile; that profile then predicts the same scenario at 2, 4
and 8 sessions (decode tok/s per session, sustained tok/s per session, TTFT p50, the
server's cache-read share with every session sharing the system prompt and tools), and
n-gram speculation on vs off on the model's own replies to the code probes of `check
--against` (the twin replays those very token ids, `twin/spec_replay.replay_seconds`).

Used by `benchmarks/twin_vs_vllm_cpu.py` (starts the servers, writes the profile and the
table) and `tests/engines/test_twin_vs_vllm_cpu.py` (the session fixtures' servers).
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from simulator.analysis.load import load_turns, turn_records
from simulator.analysis.summary import ok_rows
from simulator.check.compare import PROBES
from simulator.engines.server import EngineServer
from simulator.run.execute import execute
from simulator.run.spec import RunResult, RunSpec
from simulator.twin.model.fit import FitResult, Observation, fit_terms
from simulator.twin.model.fit_points import IDENTIFIED, RunPoints, points_from_rows
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profile_write import fitted_hardware, yaml_text
from simulator.twin.model.profiles import PROFILE_DIR, load_hardware
from simulator.twin.spec_decode.ngram import NgramSpec
from simulator.twin.spec_decode.replay import replay_seconds, replay_streams
from simulator.util.formats import percent, significant

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "calibration" / "twin-vs-vllm-cpu.yaml"
MODEL = "smollm2-135m"          # fp32 by default, as the fixtures serve it
BASE_HARDWARE = "cpu-2core"
FITTED_NAME = "cpu-2core-fitted"
FITTED_PATH = PROFILE_DIR / "hardware" / f"{FITTED_NAME}.yaml"
# what the twin must know about the server beyond the fit (not fitted: vLLM's settings)
class ServerSettings(TypedDict):
    """The profile fields `_with_server_settings` sets from the served vLLM."""

    kv_cache_bytes: int
    tflops: dict[str, float]
    engine: dict[str, object]
    sources: dict[str, str]


SERVER_SETTINGS: ServerSettings = {
    # serve_vllm's VLLM_CPU_KVCACHE_SPACE=1 GiB holds fp32 KV (vLLM's auto dtype of an fp32
    # model); the twin stores bf16, so half the bytes give the same number of tokens
    "kv_cache_bytes": 2**29,
    # lscpu here: AMD EPYC family 25 model 17 (Zen 4 Genoa), 2 cores; Zen 4 issues two
    # 256-bit FMAs a cycle (16 fp32 FMAs = 32 FLOP/cycle/core), at up to 3.7 GHz boost
    "tflops": {"fp32": 0.237, "bf16": 0.474},
    "engine": {"block_size": 32, "kv_dtype": "bf16", "max_num_seqs": 128,
               "max_num_batched_tokens": 2048},
    "sources": {"kv_cache_bytes": "serve_vllm: VLLM_CPU_KVCACHE_SPACE=1 GiB of fp32 KV; "
                "as bf16 in the twin, the same token count in 0.5 GiB",
                "tflops": "this machine's peak: 2 Zen 4 cores x 3.7 GHz (Genoa's top boost; "
                "lscpu's 2.6 GHz base gives 0.166) x 32 fp32 FLOP/cycle (two 256-bit FMA "
                "pipes); bf16 twice that (AVX512_BF16 dot products)"},
}
ENGINE_NOTE = ("vLLM 0.32 CPU defaults for the API server (engine/arg_utils.py): "
               "max_num_seqs 128, max_num_batched_tokens 2048; block size 32 as served")
FREE = IDENTIFIED
SESSIONS = (2, 4, 8)
SPEC = NgramSpec(8, prompt_lookup_min=2, prompt_lookup_max=4)   # as smol_vllm_spec serves
SPEC_MAX_TOKENS = 200
SPEC_SESSIONS = (2, 4, 8)       # speculation predicted at these, fitted at 1
# what one stream of speculation identifies: the host work per step (per sequence and
# per step are the same thing at one sequence)
SPEC_FREE = ("spec_step_s",)


def run(scenario: Path, out: Path, *, sessions: int, seed: int, turns: int | None = None,
        endpoint: str | None = None, twin: str | None = None) -> RunResult:
    """One `endurance run` of `scenario` (real server at `endpoint`, or the twin)."""
    over = [f"sessions={sessions}", f"seed={seed}"] + ([f"turns={turns}"] if turns else [])
    res = execute(RunSpec(str(scenario), over, endpoint_url=endpoint, twin=twin, out_dir=out,
                          show_progress=False, client="lean"), echo=lambda s: None)
    if res.status != "completed":
        raise RuntimeError(f"{'twin' if twin else endpoint}: run {res.status}: "
                           f"{res.outcome.reason}")
    return res


def fit_run(res: RunResult, *, base: str | Path = BASE_HARDWARE,
            free: Sequence[str] = FREE) -> tuple[FitResult, RunPoints]:
    """Fit points from a one-session run, and the fit on `base` with the server's
    settings (written to a temporary profile only while the fit reads it)."""
    pts = points_from_rows(turn_records(res.run_dir))
    with tempfile.TemporaryDirectory(prefix="endurance-twin-check-") as tmp:
        path = Path(tmp) / "base.yaml"
        path.write_text(yaml_text(_with_server_settings(base)), encoding="utf-8")
        fit = fit_terms(pts.points, str(path), MODEL, free=tuple(free))
    return fit, pts


def _with_server_settings(base: str | Path) -> dict[str, object]:
    doc = load_hardware(base).model_dump(exclude_none=True)
    doc["kv_cache_bytes"] = SERVER_SETTINGS["kv_cache_bytes"]
    doc["tflops"] = SERVER_SETTINGS["tflops"]
    doc["engine"] = {**doc.get("engine", {}), **SERVER_SETTINGS["engine"]}
    doc["sources"] = {**doc["sources"], **SERVER_SETTINGS["sources"]}
    return doc


def fitted_profile(fit: FitResult, pts: RunPoints, *, base: str | Path = BASE_HARDWARE,
                   when: str, conditions: str) -> dict[str, object]:
    """The fitted hardware profile (a dict, validated), with its source note."""
    ratio = f"{pts.token_ratio:.2f}" if pts.token_ratio else "n/a"
    source = (f"fitted {when} by benchmarks/twin_vs_vllm_cpu.py: one session of "
              f"scenarios/calibration/twin-vs-vllm-cpu.yaml on vLLM 0.32 CPU serving "
              f"SmolLM2-135M-Instruct fp32 ({len(pts.points)} points: batch-1 decode tok/s "
              f"and TTFT from the run's turn rows, prompts in cl100k units, server/cl100k "
              f"tokens {ratio}; RMS log error {100 * fit.rms_log_error:.1f}%; {conditions}). "
              f"One session cannot identify t_seq_s, kv_half_seqs, nor t0_s apart from eta_w")
    return fitted_hardware(_with_server_settings(base), fit.terms, fit.free,
                           name=FITTED_NAME, source=source,
                           description=("vLLM CPU on this 2-core machine, efficiency fitted "
                                        "to SmolLM2-135M fp32 (benchmarks/twin_vs_vllm_cpu.py)"))


@dataclass(frozen=True, slots=True)
class Row:
    """One predicted figure beside its measurement."""

    quantity: str
    setting: str
    twin: float | None
    real: float | None
    unit: str
    kind: str = "rel"        # rel: error in %; abs: difference in points (shares)

    @property
    def error(self) -> float | None:
        if self.twin is None or self.real is None:
            return None
        if self.kind == "abs":
            return 100.0 * (self.twin - self.real)
        return 100.0 * (self.twin / self.real - 1.0) if self.real else None

    def error_text(self) -> str:
        e = self.error
        if e is None:
            return "n/a"
        return f"{e:+.1f} pts" if self.kind == "abs" else f"{e:+.0f}%"


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "n/a"
    return percent(v) if unit == "%" else significant(v, 3, 100)


def markdown(rows: Sequence[Row]) -> str:
    """The comparison as a markdown table."""
    lines = ["| quantity | setting | twin | vLLM CPU | error |", "|---|---|---|---|---|"]
    for r in rows:
        unit = "" if r.unit == "%" else f" {r.unit}"
        lines.append(f"| {r.quantity} | {r.setting} | {_fmt(r.twin, r.unit)}{unit} | "
                     f"{_fmt(r.real, r.unit)}{unit} | {r.error_text()} |")
    return "\n".join(lines) + "\n"


def compact_markdown(rows: Sequence[Row]) -> str:
    """The README's short form: the per-session figures with one column per session
    count (cells `twin / real (error)`), then the other rows as a plain table."""
    grid = [r for r in rows if "session" in r.setting]
    rest = [r for r in rows if "session" not in r.setting]
    settings = list(dict.fromkeys(r.setting for r in grid))
    cell = {(r.quantity, r.setting): r for r in grid}
    lines = ["| twin / vLLM CPU (error) | " + " | ".join(settings) + " |",
             "|---" * (len(settings) + 1) + "|"]
    for q in dict.fromkeys(r.quantity for r in grid):
        unit = next(r.unit for r in grid if r.quantity == q)
        cells = [("" if (r := cell.get((q, st))) is None else
                  f"{_fmt(r.twin, r.unit)} / {_fmt(r.real, r.unit)} ({r.error_text()})")
                 for st in settings]
        lines.append(f"| {q if unit == '%' else f'{q}, {unit}'} | " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n"
    return out + ("\n" + markdown(rest) if rest else "")


def _mean_output(res: RunResult) -> float | None:
    t = ok_rows(load_turns(res.run_dir), "turn")
    return float(t.output_tokens.mean()) if len(t) else None


def session_rows(n: int, twin: RunResult, real: RunResult) -> list[Row]:
    """The per-session figures of one session count, twin beside real."""
    ts, rs = twin.summary, real.summary
    at = f"{n} session{'s' if n > 1 else ''}"
    return [
        Row("decode tok/s per session (median request)", at, ts.get("decode_tok_s_median"),
            rs.get("decode_tok_s_median"), "tok/s"),
        Row("sustained tok/s per session", at, ts.get("per_session_tok_s"),
            rs.get("per_session_tok_s"), "tok/s"),
        Row("TTFT p50", at, ts.get("ttft_p50_s"), rs.get("ttft_p50_s"), "s"),
        Row("cache-read share (shared prefix)", at, ts.get("server_cache_read_share"),
            rs.get("server_cache_read_share"), "%", kind="abs"),
        Row("output tokens per turn (mean)", at, _mean_output(twin), _mean_output(real), "tok"),
    ]


def _post(url: str, body: Mapping[str, object], timeout_s: float = 600.0) -> Any:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


@dataclass(frozen=True, slots=True)
class Timed:
    name: str
    output_tokens: int
    seconds: float
    text: str

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def warm_up(server: EngineServer) -> None:
    """One short request, so a fresh server's first-request costs (warm-up of its
    kernels) stay out of the fit's first TTFT: the twin has none."""
    _post(server.base_url + "/v1/chat/completions", {
        "model": server.model, "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8, "temperature": 0.0})


def time_probes(server: EngineServer, max_tokens: int = SPEC_MAX_TOKENS) -> list[Timed]:
    """The code probes of `check --against`, greedy, one at a time, non-streaming: each
    reply's completion tokens and wall seconds (prefill included)."""
    out = []
    for name, prompt in PROBES:
        t0 = time.monotonic()
        r = _post(server.base_url + "/v1/chat/completions", {
            "model": server.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0.0})
        dt = time.monotonic() - t0
        out.append(Timed(name, int(r["usage"]["completion_tokens"]), dt,
                         str(r["choices"][0]["message"]["content"] or "")))
    return out


def token_ids(server: EngineServer, prompt: str, reply: str) -> tuple[list[int], list[int]]:
    """The prompt as vLLM renders it (chat template) and the reply, in SmolLM2's ids."""
    p = _post(server.base_url + "/tokenize", {
        "model": server.model, "add_generation_prompt": True,
        "messages": [{"role": "user", "content": prompt}]})
    r = _post(server.base_url + "/tokenize", {"model": server.model, "prompt": reply,
                                               "add_special_tokens": False})
    return list(p["tokens"]), list(r["tokens"])


def spec_rows(plain: EngineServer, spec: EngineServer, hardware: str, *,
              max_tokens: int = SPEC_MAX_TOKENS) -> list[Row]:
    """n-gram speculation on vs off on the model's own text: the probes timed on both
    servers; the twin replays the plain server's replies (their token ids) with and
    without its n-gram proposer (SPEC, the spec server's setting)."""
    off, on = time_probes(plain, max_tokens), time_probes(spec, max_tokens)
    exchanges = [token_ids(plain, prompt, t.text) for (_, prompt), t in zip(PROBES, off, strict=True)]
    tw_off = replay_seconds(exchanges, None, hardware=hardware, model=MODEL)
    tw_on = replay_seconds(exchanges, SPEC, hardware=hardware, model=MODEL)

    def rate(pairs: Sequence[tuple[int, float]]) -> float:
        return sum(n for n, _ in pairs) / sum(s for _, s in pairs)

    real_off = sum(t.output_tokens for t in off) / sum(t.seconds for t in off)
    real_on = sum(t.output_tokens for t in on) / sum(t.seconds for t in on)
    setting = f"{len(PROBES)} code probes, ngram k={SPEC.num_speculative_tokens}"
    return [
        Row("probe tok/s, speculation off", setting, rate(tw_off), real_off, "tok/s"),
        Row("probe tok/s, n-gram speculation on", setting, rate(tw_on), real_on, "tok/s"),
        Row("speedup, on ÷ off", setting, rate(tw_on) / rate(tw_off), real_on / real_off, "×"),
    ]


def fit_rows(fit: FitResult) -> list[Row]:
    """The fit's own points, summarised as the session rows are (medians over the
    requests): what the fit at one session reproduces."""
    def med(kind: str, f: Callable[[float], float]) -> tuple[float | None, float | None]:
        rows = [r for r in fit.rows if r.obs.kind == kind]
        if not rows:
            return None, None
        tw = sorted(f(r.predicted) for r in rows)
        rl = sorted(f(r.obs.measured) for r in rows)
        return tw[len(tw) // 2], rl[len(rl) // 2]
    d, p = med("decode", float), med("prefill", float)
    return [Row("decode tok/s per session (median request)", "1 session (fitted)", *d, "tok/s"),
            Row("TTFT p50", "1 session (fitted)", *p, "s")]


def time_probe_streams(server: EngineServer, streams: int,
                       max_tokens: int = SPEC_MAX_TOKENS) -> list[Timed]:
    """`streams` clients at once, each sending every code probe of `check --against`
    back to back (client i starting at probe i), greedy and non-streaming: each
    request's completion tokens and wall seconds."""
    def client(i: int) -> list[Timed]:
        out = []
        for j in range(len(PROBES)):
            name, prompt = PROBES[(i + j) % len(PROBES)]
            t0 = time.monotonic()
            r = _post(server.base_url + "/v1/chat/completions", {
                "model": server.model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": 0.0})
            out.append(Timed(name, int(r["usage"]["completion_tokens"]),
                             time.monotonic() - t0,
                             str(r["choices"][0]["message"]["content"] or "")))
        return out
    with ThreadPoolExecutor(streams) as pool:
        return [t for got in pool.map(client, range(streams)) for t in got]


def _rate(timed: Sequence[Timed]) -> float:
    return sum(t.output_tokens for t in timed) / sum(t.seconds for t in timed)


@dataclass(frozen=True, slots=True)
class SpecCheck:
    """Speculation on this machine: fitted on one stream, predicted at more."""

    fit: FitResult
    profile: dict[str, object]   # the fitted profile with its speculation term
    rows: list[Row]


def spec_check(plain: EngineServer, spec: EngineServer, fitted: Mapping[str, object],
               out: Path, *, sessions: Sequence[int] = SPEC_SESSIONS,
               max_tokens: int = SPEC_MAX_TOKENS) -> SpecCheck:
    """n-gram speculation under concurrency: the probes sent by one stream to the
    speculating server give a `spec_replay` fit point (the plain server's replies, in
    SmolLM2's ids, replayed by the twin), which fits `SPEC_FREE` on `fitted` (the
    session fit's profile); then, without refitting, `sessions` streams on the real
    server against the twin replaying the same replies with as many streams. Each row's
    spread (the slowest and fastest client's rate) is kept beside it."""
    base = [token_ids(plain, prompt, t.text)
            for (_, prompt), t in zip(PROBES, time_probes(plain, max_tokens), strict=True)]
    out.mkdir(parents=True, exist_ok=True)
    exchanges = out / "spec-exchanges.json"
    exchanges.write_text(json.dumps(base), encoding="utf-8")
    one = time_probe_streams(spec, 1, max_tokens)
    point = Observation(kind="spec_replay", measured=_rate(one), unit="tok_s", batch=1,
                        spec=f"ngram:{SPEC.num_speculative_tokens}",
                        prompt_lookup_min=SPEC.prompt_lookup_min,
                        prompt_lookup_max=SPEC.prompt_lookup_max,
                        exchanges=str(exchanges), label="1 stream, n-gram speculation")
    path = out / "spec-base.yaml"
    path.write_text(yaml_text(fitted), encoding="utf-8")
    fit = fit_terms([point], str(path), MODEL, free=SPEC_FREE)
    eff = fitted["efficiency"]          # `fitted_hardware`'s: its terms and their source
    terms: dict[str, object] = {**(eff if isinstance(eff, Mapping) else {}),
                                **{k: float(f"{fit.terms[k]:.5g}") for k in SPEC_FREE}}
    terms["source"] = str(terms["source"]) + (
        f"; {', '.join(SPEC_FREE)} fitted on one stream of the code probes against vLLM "
        f"CPU with n-gram speculation (k {SPEC.num_speculative_tokens}, lookup "
        f"{SPEC.prompt_lookup_min}-{SPEC.prompt_lookup_max}): the replies replayed by the "
        f"twin ({fit.rows[0].error_pct:+.1f}%)")
    profile = {**fitted, "efficiency": terms}
    path.write_text(yaml_text(profile), encoding="utf-8")
    setting = f"{len(PROBES)} code probes, ngram k={SPEC.num_speculative_tokens}"
    rows = [Row("probe tok/s with speculation", f"1 stream (fitted), {setting}",
                fit.rows[0].predicted, fit.rows[0].obs.measured, "tok/s")]
    pm = build_perf_model(str(path), MODEL, spec=f"ngram:{SPEC.num_speculative_tokens}")
    for n in sessions:
        real = time_probe_streams(spec, n, max_tokens)
        twin = replay_streams(base, SPEC, n, pm)
        clients = [_rate([t for k, t in enumerate(real) if k // len(PROBES) == i])
                   for i in range(n)]
        rows.append(Row("probe tok/s with speculation", f"{n} streams, {setting} "
                        f"(real clients {min(clients):.3g}-{max(clients):.3g})",
                        sum(a for a, _ in twin) / sum(b for _, b in twin), _rate(real),
                        "tok/s"))
    return SpecCheck(fit, profile, rows)
