"""Fit points from a run's turn rows: what `endurance twin fit` needs, taken from a
one-session `endurance run` against a real server (the product's own records).

Each ok turn of a single-session run gives two observations of batch 1:

* decode: the request's decode tok/s (`(n − 1) / (last − first token)`), at its context
  (prompt plus half the reply);
* prefill: its TTFT in seconds, for its prompt with the server-reported cached part.

One session only: the rows do not record how many sequences the server ran beside a
request, and with one session it is always one. A batch-1 run cannot identify the
per-sequence terms (`t_seq_s`, `kv_half_seqs`), nor separate the fixed step cost `t0_s`
from the weight-read efficiency `eta_w` (both are paid once per step): `IDENTIFIED`
lists what such points do identify at short contexts.

Token units: the twin counts tokens with its own tokenizer (cl100k), a real server with
the model's. With `units="twin"` (the default) prompts and cached prefixes are the
client's cl100k estimates (`context_tokens_est`, the server's cached share of it), so a
profile fitted on them reproduces the run when the twin runs the same scenario; with
`units="server"` they are the server's own counts. Decode rates stay per server token
(one token per step on either side). Pure: rows in, observations out.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from simulator.errors import InputError
from simulator.twin.model.fit import Observation
from simulator.util.numbers import finite_float, to_int

Units = Literal["twin", "server"]
# the terms batch-1 decode and prefill points of short contexts identify: the decode
# step (weight reads) and prefill compute. t0_s is indistinguishable from the weight read
# at one sequence; eta_kv and eta_attn scale with context, and over the ≤ 2k-token
# contexts of a CPU run their effect is within the noise (fitting them drove eta_attn
# to its bound of 1 on vLLM CPU here, eta_kv to 0.1 without a better fit)
IDENTIFIED = ("eta_w", "eta_c")
MIN_DECODE_TOKENS = 8     # shorter replies time a handful of steps: too noisy to fit


@dataclass(frozen=True, slots=True)
class RunPoints:
    points: tuple[Observation, ...]
    skipped: int                 # ok turns that gave no usable figure
    token_ratio: float | None    # server prompt tokens ÷ client estimate (median)


def _num(row: Mapping[str, object], key: str) -> float | None:
    return finite_float(row.get(key))


def points_from_rows(rows: Iterable[Mapping[str, object]], *, units: Units = "twin",
                     min_decode_tokens: int = MIN_DECODE_TOKENS) -> RunPoints:
    """Decode and prefill observations from the ok turn rows of a one-session run."""
    if units not in ("twin", "server"):
        raise InputError(f"points: units must be twin or server, not {units!r}")
    turns = [r for r in rows if r.get("request_kind", "turn") == "turn" and bool(r.get("ok"))]
    sessions = {str(r.get("session_id")) for r in turns}
    if len(sessions) > 1:
        raise InputError(f"points: the run has {len(sessions)} sessions; fit points come "
                         "from a one-session run (the rows do not say what ran beside a request)")
    if not turns:
        raise InputError("points: the run has no ok turns")
    points: list[Observation] = []
    ratios: list[float] = []
    skipped = 0
    for r in sorted(turns, key=lambda r: to_int(r.get("turn_index") or 0)):
        est, prompt = _num(r, "context_tokens_est"), _num(r, "prompt_tokens")
        cached = _num(r, "cache_read_tokens") or 0.0
        out, ttft, dec = _num(r, "output_tokens"), _num(r, "ttft_s"), _num(r, "decode_tok_s")
        if not prompt or prompt <= 0 or not est or est <= 0:
            skipped += 1
            continue
        ratios.append(prompt / est)
        scale = est / prompt if units == "twin" else 1.0
        n_prompt = max(1, round(prompt * scale))
        n_cached = min(n_prompt - 1, round(min(cached, prompt) * scale))
        label = f"turn {to_int(r.get('turn_index') or 0)}"
        used = False
        if ttft and ttft > 0:
            points.append(Observation(kind="prefill", measured=ttft, unit="s",
                                      prompt_tokens=n_prompt, cached_tokens=n_cached,
                                      label=f"{label} TTFT"))
            used = True
        if dec and dec > 0 and out and out >= min_decode_tokens:
            context = n_prompt + round(out * scale / 2)
            points.append(Observation(kind="decode", measured=dec, unit="tok_s", batch=1,
                                      context=context, label=f"{label} decode"))
            used = True
        skipped += not used
    return RunPoints(tuple(points), skipped, statistics.median(ratios) if ratios else None)


def points_document(result: RunPoints, *, hardware: str | None, model: str | None,
                    source: str, fit: Iterable[str] = IDENTIFIED,
                    engine: Mapping[str, object] | None = None) -> dict[str, object]:
    """A points file (`simulator.twin.model.fit.PointsFile`'s shape) as a YAML-ready dict."""
    ratio = result.token_ratio
    notes = ["batch 1 (one session): t_seq_s, kv_half_seqs and t0_s are not identified "
             "and stay at the profile's priors"]
    if ratio is not None:
        notes.append(f"server prompt tokens / client cl100k estimate: {ratio:.3f} (median)")
    doc: dict[str, object] = {"hardware": hardware, "model": model, "source": source,
                           "fit": list(fit), "assumptions": notes}
    if engine:
        doc["engine"] = dict(engine)
    doc["points"] = [p.model_dump(exclude_defaults=True) for p in result.points]
    return {k: v for k, v in doc.items() if v is not None}
