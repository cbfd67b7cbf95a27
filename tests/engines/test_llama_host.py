"""The xllamacpp host takes llama-server's flags as llama-server does, refuses the rest in
one line, and the installed `llama-server` script follows the host when it changes."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from simulator.engines import install
from simulator.engines.llama_host import params_for, parse_args
from simulator.engines.server import llamacpp_cpu_args

SERVER_FLAGS = ["-m", "/m.gguf", "-a", "tiny", "--host", "127.0.0.1", "--port", "8123",
                "-c", "131072", "-np", "4", "-t", "2", "--metrics", "--jinja", "--no-webui",
                "--offline", "-kvu", "--ignore-eos"]


def test_the_flags_serve_llamacpp_passes_are_all_taken() -> None:
    args = parse_args([*SERVER_FLAGS, *llamacpp_cpu_args("flags : amx_tile")])
    assert (args.model, args.alias, args.host, args.port) == ("/m.gguf", "tiny", "127.0.0.1", 8123)
    assert (args.ctx, args.slots, args.threads) == (131072, 4, 2)
    assert args.metrics and args.jinja and args.offline and args.kv_unified and args.ignore_eos
    assert not args.webui and not args.repack


def test_defaults_are_llama_server_s() -> None:
    args = parse_args(["-m", "x.gguf"])
    assert (args.port, args.ctx, args.slots) == (8080, 0, 1)
    assert args.webui and args.repack and not args.metrics and not args.kv_unified


@pytest.mark.parametrize("argv", [
    ["-m", "x.gguf", "--cache-reuse", "256"],     # a real flag the host does not take
    ["-m", "x.gguf", "-np", "0"],
    ["-m", "x.gguf", "--port", "-1"],
    ["-m", "x.gguf", "-t", "99999999999"],
    ["--port", "8000"],                           # no model
])
def test_other_flags_are_refused_in_one_line(argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llama-server (xllamacpp host): ")


def test_params_are_set_as_the_flags_say() -> None:
    class Params(SimpleNamespace):
        def __init__(self) -> None:
            super().__init__(model=SimpleNamespace(), cpuparams=SimpleNamespace(),
                             cpuparams_batch=SimpleNamespace(), sampling=SimpleNamespace())

    xlc = ModuleType("xllamacpp")
    xlc.CommonParams = Params  # type: ignore[attr-defined]
    p: Any = params_for(parse_args(SERVER_FLAGS), xlc)
    assert p.model.path == "/m.gguf" and p.model_alias == {"tiny"}
    assert (p.hostnames, p.port, p.n_ctx, p.n_parallel) == (["127.0.0.1"], 8123, 131072, 4)
    assert p.cpuparams.n_threads == p.cpuparams_batch.n_threads == 2
    assert p.endpoint_metrics and p.use_jinja and p.offline and p.kv_unified
    assert p.sampling.ignore_eos and not p.ui and not p.no_extra_bufts


def test_the_server_script_runs_the_host_copied_into_the_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = install._llama_server_script(venv)
    assert os.access(script, os.X_OK)
    host = venv / install.LLAMA_HOST_SCRIPT
    assert str(host) in script.read_text() and str(venv / "bin" / "python") in script.read_text()
    assert host.read_text() == (Path(install.__file__).parent / "llama_host.py").read_text()
    host.write_text("# an older host\n")          # a cache left by an older checkout
    install._llama_server_script(venv)
    assert host.read_text() != "# an older host\n"
