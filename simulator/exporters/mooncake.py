"""A run → Mooncake JSONL (`endurance export mooncake RUN_DIR -o trace.jsonl`).

One row per successful request, in send order: `timestamp` (ms since the run began),
`session_id`, `input_length`, `output_length`, `hash_ids` and, after a session's
first row, `delay` (its think/tool time, ms: Dynamo's closed-loop sessions). Ids
number 512-token chained blocks over the whole file: a 512-block's hash is every 8th
64-block chain hash (it names the same prefix); a trailing partial block gets an id
of its own, as Mooncake's producers give it one.
"""

from __future__ import annotations

from simulator.exporters.run_requests import SentRequest
from simulator.util.numbers import to_float, to_int

BLOCK_SIZE = 512


def mooncake_row(r: SentRequest, ids: dict[str, int], fine: int = 64) -> dict[str, object]:
    row = r.row
    k = BLOCK_SIZE // fine
    coarse = [r.hashes[j] for j in range(k - 1, len(r.hashes), k)]
    prompt = row.get("prompt_tokens")
    n_in = to_int(prompt if prompt is not None else row.get("context_tokens_est") or 0)
    if n_in > len(coarse) * BLOCK_SIZE and r.hashes:     # the partial block's own id
        coarse.append(f"{r.hashes[-1]}+{n_in - len(coarse) * BLOCK_SIZE}")
    d: dict[str, object] = {
        "timestamp": round(to_float(row["started_mono_s"]) * 1000.0, 1),
        "session_id": r.session_id, "input_length": n_in,
        "output_length": to_int(row.get("output_tokens") or 0),
        "hash_ids": [ids.setdefault(h, len(ids)) for h in coarse]}
    if to_int(row.get("turn_index", 0)) > 0:
        d["delay"] = round(to_float(row.get("think_time_s") or 0.0) * 1000.0, 1)
    return d
