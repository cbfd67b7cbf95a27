"""Serve llama.cpp's own HTTP server (`llama-server`) from the prebuilt `xllamacpp` wheel,
taking the `llama-server` flags the tests and docs use:

    python llama_host.py -m MODEL.gguf -a NAME --host 127.0.0.1 --port P -c CTX -np N \\
        -t THREADS --metrics --jinja --no-webui --offline -kvu [--ignore-eos] [--no-repack]

Why: no package index ships a `llama-server` binary for Linux, and building one from
source is ~7 CPU-minutes, the largest single cost of a first test run. `xllamacpp`
(PyPI, MIT) compiles llama.cpp's server — the same routes, `/metrics`, `/slots`, Messages
and Chat APIs — into a Python extension; this host only turns the flags into its
`CommonParams` and keeps the process alive until SIGTERM/SIGINT. Every other flag is refused
in one line, so a flag cannot be silently ignored. Run with the engine venv's python
(stdlib + xllamacpp); `install.ensure_llamacpp` writes a `llama-server` script that does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from types import ModuleType
from typing import NoReturn


@dataclass(frozen=True, slots=True)
class HostArgs:
    model: str
    alias: str | None
    host: str
    port: int
    ctx: int
    slots: int
    threads: int
    metrics: bool
    jinja: bool
    webui: bool
    offline: bool
    kv_unified: bool
    ignore_eos: bool
    repack: bool


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:   # one line, llama-server's exit code
        sys.stderr.write(f"llama-server (xllamacpp host): {message}\n")
        raise SystemExit(1)


def parse_args(argv: list[str]) -> HostArgs:
    """The supported subset of llama-server's flags; anything else exits 1 naming it."""
    p = _Parser(prog="llama-server", add_help=False, allow_abbrev=False)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-a", "--alias")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("-c", "--ctx-size", type=int, default=0)
    p.add_argument("-np", "--parallel", type=int, default=1)
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--jinja", action="store_true")
    p.add_argument("--no-webui", action="store_true")
    p.add_argument("--offline", action="store_true")
    p.add_argument("-kvu", "--kv-unified", action="store_true")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("-nr", "--no-repack", action="store_true")
    ns = p.parse_args(argv)
    for flag, value, low in (("--port", ns.port, 0), ("-c", ns.ctx_size, 0),
                             ("-np", ns.parallel, 1), ("-t", ns.threads, 1)):
        if not low <= value <= 1 << 24:
            p.error(f"{flag} {value} is out of range")
    return HostArgs(ns.model, ns.alias, ns.host, ns.port, ns.ctx_size, ns.parallel,
                    ns.threads, ns.metrics, ns.jinja, not ns.no_webui, ns.offline,
                    ns.kv_unified, ns.ignore_eos, not ns.no_repack)


def params_for(args: HostArgs, xlc: ModuleType) -> object:
    """xllamacpp's CommonParams set as llama-server sets them from these flags (`xlc`:
    the xllamacpp module, which ships no type information)."""
    p = xlc.CommonParams()
    p.model.path = args.model
    if args.alias:
        p.model_alias = {args.alias}
    p.hostnames = [args.host]
    p.port = args.port
    p.n_ctx = args.ctx
    p.n_parallel = args.slots
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.endpoint_metrics = args.metrics
    p.use_jinja = args.jinja
    p.ui = args.webui
    p.offline = args.offline
    p.kv_unified = args.kv_unified
    p.sampling.ignore_eos = args.ignore_eos
    p.no_extra_bufts = not args.repack
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    stop = {"now": False}

    def _stop(signum: int, _frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    xlc = importlib.import_module("xllamacpp")
    try:
        server = xlc.Server(params_for(args, xlc))
    except Exception as exc:   # the extension raises plain exceptions on a bad model
        sys.stderr.write(f"llama-server (xllamacpp host): {exc}\n")
        return 1
    sys.stderr.write(f"llama-server (xllamacpp host): serving on {server.listening_address}\n")
    sys.stderr.flush()
    while not stop["now"]:
        time.sleep(0.2)
    # The server's threads hold no state worth flushing: leave without joining them.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
