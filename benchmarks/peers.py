"""Peer load generators (NVIDIA AIPerf, GuideLLM) as client-ceiling paths.

Each peer lives in its own venv under ``${ENDURANCE_PEERS:-~/.cache/endurance-peers}``
(``benchmarks/install_peers.sh`` puts it there; nothing here installs anything). A point
runs the peer's CLI as a subprocess pinned to the client core, fully offline (local HF
tokenizer, ``HF_HUB_OFFLINE=1``, no UI, no telemetry), with a fixed request count at
concurrency = sessions, synthetic prompts, output length = the reply length, and no
rate limit. It returns the dict shape ``client_ceiling.py`` uses:

* ``tokens``: content deltas the peer ingested, from its own per-request export (AIPerf:
  ``len(inter_chunk_latency) + 1`` per record; GuideLLM: ``timings.token_iterations``).
* ``elapsed_s``: first request start to last request end, from the same export (the
  peer's start-up, imports and data synthesis are outside it, as our worker's are).
* ``cpu_s``: CPU of the whole peer process tree inside that window, from /proc samples
  (every ``SAMPLE_S``) of utime+stime+cutime+cstime over the tree, interpolated at the
  window's ends; ``cpu_total_s``: the tree's whole run incl. start-up, exact, from
  ``getrusage(RUSAGE_CHILDREN)`` (this runner is a child subreaper, so orphaned
  workers are reaped and counted here too).
* ``peak_rss_mb``: peak of the tree's summed RSS over the samples (shared pages count
  once per process, so this overstates a forked tree); ``max_proc_rss_mb``: the
  largest single process (``ru_maxrss`` of children).

Protocols: AIPerf 0.13.0 speaks the Messages API (``--endpoint-type messages``) and runs
against the Anthropic fake. GuideLLM 0.8.1 has no Anthropic backend (its only HTTP
backend, ``openai_http``, knows /v1/completions, /v1/chat/completions, /v1/responses,
embeddings, audio and pooling), so it runs against ``fake_server.py --protocol openai``:
the same number of content deltas per reply as Chat Completions chunks.

    python benchmarks/peers.py --peer aiperf --url http://127.0.0.1:PORT --sessions 16 \
        --requests 160 --tokens 512 --cpu 0
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PEERS_DIR = Path(os.environ.get("ENDURANCE_PEERS",
                                str(Path.home() / ".cache" / "endurance-peers")))
TOKENIZER_DIR = Path.home() / ".cache" / "endurance-engines" / "tiny-v1-hf"
PROTOCOL = {"aiperf": "anthropic", "guidellm": "openai"}
WIRE = {"aiperf": "anthropic messages SSE", "guidellm": "openai chat-completions SSE"}
# `--protocol openai` (client_ceiling's one-protocol side-by-side): AIPerf speaks Chat
# Completions too; GuideLLM only speaks it anyway.
AIPERF_ENDPOINT = {"anthropic": "messages", "openai": "chat"}
OPENAI_WIRE = "openai chat-completions SSE"


def wire(name: str) -> str:
    """The protocol a peer speaks in this run (`--protocol openai` puts every peer on
    Chat Completions)."""
    return OPENAI_WIRE if os.environ.get("ENDURANCE_PEER_PROTOCOL") == "openai" else WIRE[name]
SAMPLE_S = 0.1
PROMPT_TOKENS = 32
_CLK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def installed() -> dict[str, Path]:
    """Peers whose venv has the CLI: name -> executable."""
    found = {}
    for name in PROTOCOL:
        exe = PEERS_DIR / name / "bin" / name
        if exe.is_file() and os.access(exe, os.X_OK):
            found[name] = exe
    return found


def version(name: str) -> str:
    py = PEERS_DIR / name / "bin" / "python"
    res = subprocess.run([str(py), "-c", f"import importlib.metadata as m; "
                          f"print(m.version({name!r}))"], capture_output=True, text=True,
                         check=False, timeout=60)
    return res.stdout.strip() or "?"


# ------------------------------------------------------------------ process tree --
def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _stat(pid: int) -> tuple[float, float, int] | None:
    """(own cpu s, reaped children's cpu s, rss bytes) of one process."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return ((int(f[11]) + int(f[12])) / _CLK, (int(f[13]) + int(f[14])) / _CLK,
            int(f[21]) * _PAGE)


def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) one live process has used itself."""
    st = _stat(pid)
    if st is None:
        raise ProcessLookupError(pid)
    return st[0]


class TreeSampler(threading.Thread):
    """Samples (wall time, tree cpu s, tree rss bytes, server cpu s) every SAMPLE_S.

    Tree cpu = this process's reaped children + every live descendant's own and reaped
    children's time: each process's CPU is counted once whether it is alive, a zombie,
    or reaped by a parent inside the tree (or by us, the subreaper)."""

    def __init__(self, server_pid: int | None) -> None:
        super().__init__(daemon=True)
        self.server_pid = server_pid
        self.samples: list[tuple[float, float, int, float]] = []
        self.stop = threading.Event()

    def sample(self) -> tuple[float, float, int, float]:
        me = os.getpid()
        own = _stat(me)
        cpu, rss = (own[1] if own else 0.0), 0
        todo, seen = _children(me), set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            st = _stat(pid)
            if st:
                cpu += st[0] + st[1]
                rss += st[2]
            todo += _children(pid)
        srv = _stat(self.server_pid) if self.server_pid else None
        return time.time(), cpu, rss, (srv[0] if srv else 0.0)

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self.sample())
            self.stop.wait(SAMPLE_S)

    def at(self, t: float, col: int) -> float:
        """Column `col` linearly interpolated at wall time t."""
        s = self.samples
        i = bisect.bisect_left([x[0] for x in s], t)
        if i <= 0:
            return s[0][col]
        if i >= len(s):
            return s[-1][col]
        (t0, *a), (t1, *b) = s[i - 1], s[i]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
        return float(a[col - 1] + w * (b[col - 1] - a[col - 1]))


def _set_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_orphans(deadline_s: float = 10.0) -> int:
    """Wait for descendants re-parented to us; kill what outlives the deadline."""
    n, end = 0, time.monotonic() + deadline_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return n
        if pid:
            n += 1
            continue
        if time.monotonic() > end:
            for c in _children(os.getpid()):
                with contextlib.suppress(OSError):
                    os.kill(c, 9)
            end = time.monotonic() + 5
        time.sleep(0.05)


# ------------------------------------------------------------------- peer commands --
def _env(tmp: Path, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1", TQDM_DISABLE="1",
               HF_HOME=str(tmp / "hf"), HF_HUB_CACHE=str(tmp / "hf" / "hub"),
               GUIDELLM__MAX_WORKER_PROCESSES=str(workers),
               GUIDELLM__DEFAULT_RESULTS_DIR=str(tmp), NO_COLOR="1", TERM="dumb")
    return env


def _hf_cache_alias(tmp: Path) -> str:
    """AIPerf 0.13.0 in offline mode resolves --tokenizer through the HF hub cache even
    for a local directory (a plain path fails with HFValidationError), so expose the
    local tokenizer dir as a cached repo in a private cache."""
    snap = tmp / "hf" / "hub" / "models--endurance--tiny-v1-hf" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    for f in TOKENIZER_DIR.iterdir():
        (snap / f.name).symlink_to(f)
    refs = snap.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("0" * 40)
    return "endurance/tiny-v1-hf"


def aiperf_cmd(exe: Path, url: str, sessions: int, requests: int, tokens: int,
               tmp: Path, workers: int) -> list[str]:
    return [str(exe), "profile", "--model", "fake", "--url", url,
            "--endpoint-type", AIPERF_ENDPOINT[os.environ.get("ENDURANCE_PEER_PROTOCOL",
                                                              "anthropic")], "--streaming",
            "--tokenizer", _hf_cache_alias(tmp),
            "--concurrency", str(sessions), "--request-count", str(requests),
            "--synthetic-input-tokens-mean", str(PROMPT_TOKENS),
            "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(tokens), "--output-tokens-stddev", "0",
            # count output tokens from the server's usage, not by re-tokenizing the
            # reply: the cheaper of AIPerf's two modes, so the ceiling is its best
            "--use-server-token-count",
            "--workers-max", str(workers), "--random-seed", "0",
            "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
            "--no-auto-plot", "--artifact-dir", str(tmp / "out")]


def aiperf_parse(tmp: Path) -> dict[str, Any]:
    starts, ends, lat, tokens, ok = [], [], [], 0, 0
    with (tmp / "out" / "profile_export.jsonl").open() as f:
        for line in f:
            rec = json.loads(line)
            md, m = rec["metadata"], rec.get("metrics", {})
            if rec.get("error") or "inter_chunk_latency" not in m:
                continue
            ok += 1
            starts.append(md["request_start_ns"] / 1e9)
            ends.append(md["request_end_ns"] / 1e9)
            lat.append(md["request_end_ns"] / 1e9 - md["request_start_ns"] / 1e9)
            tokens += len(m["inter_chunk_latency"]["value"]) + 1
    return {"tokens": tokens, "requests": ok, "t0": min(starts), "t1": max(ends),
            "p50_request_s": statistics.median(lat),
            "tokens_source": "AIPerf records: len(inter_chunk_latency)+1 content responses"}


def guidellm_cmd(exe: Path, url: str, sessions: int, requests: int, tokens: int,
                 tmp: Path, workers: int) -> list[str]:
    del workers  # GUIDELLM__MAX_WORKER_PROCESSES in the environment
    return [str(exe), "run",
            "--backend", f"kind=openai_http,target={url},model=fake,"
                         "request_format=/v1/chat/completions,validate_backend=false",
            "--profile", f"kind=concurrent,streams={sessions}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},"
                      f"output_tokens={tokens}",
            "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER_DIR}",
            "--output", f"kind=json,path={tmp / 'out.json'}",
            "--disable-console"]


def guidellm_parse(tmp: Path) -> dict[str, Any]:
    bench = json.loads((tmp / "out.json").read_text())["benchmarks"][0]
    reqs = bench["requests"]["successful"]
    tm = [r["info"]["timings"] for r in reqs]
    return {"tokens": sum(int(t["token_iterations"] or 0) for t in tm), "requests": len(reqs),
            "t0": min(t["request_start"] for t in tm), "t1": max(t["request_end"] for t in tm),
            "p50_request_s": statistics.median(t["request_end"] - t["request_start"] for t in tm),
            "errored": len(bench["requests"]["errored"]),
            "worker_processes": bench["scheduler_state"]["num_processes"],
            "tokens_source": "GuideLLM report: sum of timings.token_iterations"}


RUNNERS: dict[str, tuple[Callable[..., list[str]], Callable[[Path], dict[str, Any]]]] = {
    "aiperf": (aiperf_cmd, aiperf_parse), "guidellm": (guidellm_cmd, guidellm_parse)}


def run_peer(name: str, url: str, sessions: int, requests: int, tokens: int, cpu: int,
             server_pid: int | None = None, workers: int = 1, timeout_s: float = 900,
             keep: Path | None = None) -> dict[str, Any]:
    """Run one point; returns client_ceiling's result dict (or {"error": ...}).

    Makes the calling process a child subreaper and reaps every child it has at the end,
    so call it from a process of its own (``main`` here, as client_ceiling does)."""
    exe = installed().get(name)
    if exe is None:
        return {"error": f"{name} not installed under {PEERS_DIR}"}
    if not TOKENIZER_DIR.is_dir():
        return {"error": f"no local tokenizer at {TOKENIZER_DIR}"}
    _set_subreaper()
    make_cmd, parse = RUNNERS[name]
    tmp = Path(tempfile.mkdtemp(prefix=f"peer-{name}-"))
    try:
        cmd = make_cmd(exe, url, sessions, requests, tokens, tmp, workers)
        sampler = TreeSampler(server_pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.start()
        with (tmp / "stdout.log").open("w") as log:
            proc = subprocess.Popen(cmd, cwd=tmp, env=_env(tmp, workers), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
        _reap_orphans()
        sampler.stop.set()
        sampler.join()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        me = resource.getrusage(resource.RUSAGE_SELF)
        if rc != 0:
            tail = (tmp / "stdout.log").read_text(errors="replace").strip().splitlines()
            return {"error": f"{name} exit {rc}: " + (tail[-1] if tail else "")}
        out = parse(tmp)
        t0, t1 = out.pop("t0"), out.pop("t1")
        elapsed = t1 - t0
        out.update(
            elapsed_s=elapsed,
            cpu_s=sampler.at(t1, 1) - sampler.at(t0, 1),
            cpu_total_s=(ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            peak_rss_mb=max(s[2] for s in sampler.samples) / 2**20,
            max_proc_rss_mb=ru1.ru_maxrss / 1024,
            runner_cpu_s=me.ru_utime + me.ru_stime,  # this sampler, not in cpu_s
            protocol=wire(name), version=version(name), workers=workers,
            cpu_source=f"/proc tree samples every {SAMPLE_S * 1000:.0f} ms, in-window",
            rss_source="peak of summed tree RSS (samples)")
        if server_pid:
            out["server_cpu_share"] = (sampler.at(t1, 3) - sampler.at(t0, 3)) / elapsed
        return out
    finally:
        if keep is not None:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", choices=sorted(PROTOCOL), required=True)
    ap.add_argument("--url", required=True, help="fake server base URL")
    ap.add_argument("--sessions", type=int, default=1, help="concurrency")
    ap.add_argument("--requests", type=int, default=None, help="default: sessions × 10")
    ap.add_argument("--tokens", type=int, default=512, help="reply length (deltas)")
    ap.add_argument("--cpu", type=int, default=0, help="client core to pin the peer to")
    ap.add_argument("--server-pid", type=int, default=None)
    ap.add_argument("--runner-cpu", type=int, default=None,
                    help="pin this sampling runner here (default: unpinned); never the "
                         "client core, so the peer keeps that core to itself")
    ap.add_argument("--workers", type=int, default=1,
                    help="peer worker processes (AIPerf --workers-max, GuideLLM "
                         "GUIDELLM__MAX_WORKER_PROCESSES)")
    ap.add_argument("--keep", type=Path, default=None, help="copy the peer's output here")
    ap.add_argument("--protocol", choices=["anthropic", "openai"], default=None,
                    help="wire protocol (default: the peer's own, see PROTOCOL)")
    a = ap.parse_args(argv)
    os.environ["ENDURANCE_PEER_PROTOCOL"] = a.protocol or PROTOCOL[a.peer]
    if a.runner_cpu is not None:
        os.sched_setaffinity(0, {a.runner_cpu})
    out = run_peer(a.peer, a.url, a.sessions, a.requests or a.sessions * 10, a.tokens,
                   a.cpu, a.server_pid, a.workers, keep=a.keep)
    print(json.dumps(out), flush=True)
    sys.exit(1 if "error" in out else 0)


if __name__ == "__main__":
    main()
