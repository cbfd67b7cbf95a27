"""CLI commands of the twin: `endurance twin fit` (and, from another module, `twin serve`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from simulator.cli._app import main
from simulator.cli.fit_inputs import BENCH_FREE
from simulator.errors import InputError
from simulator.twin.model.profiles import DEFAULT_FREE
from simulator.util.formats import significant

if TYPE_CHECKING:  # the fitting code (numpy) is imported by `twin fit` only
    from simulator.twin.model.fit import FitResult
    from simulator.twin.model.perf_model import RooflinePerfModel


@main.group(name="twin")
def twin_group() -> None:
    """The twin: a calibrated, simulated vLLM engine (fit it, serve it)."""


def _terms_table(result: FitResult) -> Table:
    table = Table(title="efficiency terms")
    table.add_column("term")
    table.add_column("value", justify="right")
    table.add_column("status")
    for name, value in result.terms.items():
        table.add_row(name, f"{value:.6g}", "fitted" if name in result.free else "prior")
    return table


def _points_table(result: FitResult) -> Table:
    table = Table(title=f"points (RMS log error {100 * result.rms_log_error:.1f}%)")
    for col, justify in (("point", "left"), ("predicted", "right"),
                         ("measured", "right"), ("unit", "left"), ("error %", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, row in enumerate(result.rows):
        label = row.obs.label or f"{row.obs.kind} #{i + 1}"
        table.add_row(label, significant(row.predicted, 4, 1000), significant(row.obs.measured, 4, 1000),
                      row.obs.unit, f"{row.error_pct:+.1f}")
    return table


@twin_group.command(name="fit")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--hardware", default=None, help="card profile name or YAML path "
              "(default: the points file's `hardware`)")
@click.option("--model", default=None, help="model profile name or YAML path "
              "(default: the points file's `model`)")
@click.option("--free", "free", default=None,
              help=f"comma-separated terms to fit (default: the file's `fit`, "
                   f"else {','.join(DEFAULT_FREE)}; benchmark files alone: "
                   f"{','.join(BENCH_FREE)})")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write a card profile with the fitted terms here (YAML), for "
                   "--twin OUT/MODEL")
@click.option("--vllm-version", "vllm_version", default=None,
              help="the vLLM version the benchmark files were measured on (noted)")
def fit_command(files: tuple[Path, ...], hardware: str | None, model: str | None,
                free: str | None, out: Path | None = None,
                vllm_version: str | None = None) -> None:
    """Fit the performance model's efficiency terms to FILES: points files (YAML/CSV)
    and the benchmark results users have (`vllm bench serve --save-result` JSON,
    AIPerf's profile_export_aiperf.json, GuideLLM's benchmarks JSON; docs/bench.md)."""
    from simulator.cli.fit_inputs import gather
    from simulator.twin.model.fit import fit_terms
    if out is not None and out.exists() and not out.is_file():
        raise InputError(f"--out {out}: not a regular file")
    pf = gather(files, vllm_version)
    hw, mp = hardware or pf.hardware, model or pf.model
    if not hw or not mp:
        raise InputError(f"{files[0]}: give --hardware and --model (the files name none)")
    terms = [t.strip() for t in free.split(",") if t.strip()] if free is not None else pf.fit
    if free is not None and not terms:
        raise InputError(f"--free {free!r}: no term named (e.g. --free eta_w,eta_c)")
    runner = None
    if any(p.kind == "spec_decode" for p in pf.points):   # scenarios run as `endurance run`
        from simulator.sweep.calibration import point_runner
        runner = point_runner(f"{hw}/{mp}")
    default = BENCH_FREE if pf.only_bench else DEFAULT_FREE
    result = fit_terms(pf.points, hw, mp, free=tuple(terms or default),
                       engine=pf.engine, runner=runner)
    console = Console()
    console.print(f"twin fit: {hw} × {mp}, {len(pf.points)} points from "
                  f"{len(files)} file(s), {result.iterations} iterations")
    console.print(_terms_table(result))
    console.print(_points_table(result))
    if out is None:
        snippet = {"efficiency": {k: float(f"{v:.5g}") for k, v in result.terms.items()}}
        console.print("profile snippet (paste into the hardware YAML, with a source note):")
        console.print(yaml.safe_dump(snippet, sort_keys=False), markup=False, highlight=False)
        return
    _write_card(out, hw, mp, result, pf.sources, vllm_version)
    console.print(f"card profile written: {out} (run on it: --twin {out}/{mp})",
                  markup=False, highlight=False)


def _write_card(out: Path, hw: str, mp: str, result: FitResult, sources: list[str],
                vllm_version: str | None) -> None:
    """The fitted card profile (`twin.model.fitted_profile`), checked by loading it back."""
    from datetime import date

    from simulator.twin.model.fitted_profile import fitted_card
    from simulator.twin.model.profiles import kernel_family, load_hardware, load_model
    card = load_hardware(hw)
    source = (f"endurance twin fit on {date.today().isoformat()} to {'; '.join(sources)}"
              + (f", vLLM {vllm_version}" if vllm_version else "")
              + f" (RMS log error {result.rms_log_error:.1%})")
    data = fitted_card(card, out.stem, kernel_family(load_model(mp)), result.terms,
                       result.free, source)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(data, sort_keys=False, width=100), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write ({exc.strerror})") from None
    load_hardware(out)          # what --twin will read: refused now, not on the first run


@twin_group.command(name="points")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="points file to write (YAML, for `twin fit`)")
@click.option("--hardware", default=None, help="card profile the points are for")
@click.option("--model", default=None, help="model profile the points are for")
@click.option("--units", type=click.Choice(["twin", "server"]), default="twin",
              show_default=True, help="prompt tokens as the twin counts them (cl100k "
              "estimates) or as the server did")
@click.option("--force", is_flag=True, help="Overwrite an existing points file.")
def points_command(run_dir: Path, output: Path, hardware: str | None, model: str | None,
                   units: str, force: bool = False) -> None:
    """Fit points (decode tok/s, TTFT) from a one-session run's turn rows in RUN_DIR."""
    from simulator.analysis.load import turn_records
    from simulator.twin.model.fit_points import points_document, points_from_rows
    if not (run_dir / "turns.parquet").is_file():
        raise InputError(f"{run_dir}: no turns.parquet (not a results directory)")
    _check_points_output(output, run_dir, force)
    rows = turn_records(run_dir)
    result = points_from_rows(rows, units="server" if units == "server" else "twin")
    doc = points_document(result, hardware=hardware, model=model,
                          source=f"endurance twin points {run_dir} (units: {units})")
    try:
        output.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{output}: cannot write points ({exc.strerror})") from None
    click.echo(f"twin points: {len(result.points)} points from {run_dir} "
               f"({result.skipped} turns unused) -> {output}")


def _check_points_output(output: Path, run_dir: Path, force: bool) -> None:
    """Never inside the run read (its turns.parquet was overwritten with YAML), never a
    device node, an existing file only with --force."""
    from simulator.util.bounded import is_special
    run = run_dir.resolve()
    target = output.resolve()
    if target == run or run in target.parents:
        raise InputError(f"{output}: inside the run directory {run_dir}; choose an -o path "
                         "outside it")
    if is_special(output) or output.is_dir():
        raise InputError(f"{output}: not a regular file; -o expects a points file path")
    if output.exists() and not force:
        raise InputError(f"{output}: already exists; choose another -o path or pass --force")


SHOW_CARDS = ("a40", "gb10", "h100", "h200")


def version_line(pm: Any) -> str:
    """The vLLM release a twin imitates and the release-dependent default it resolved."""
    from simulator.twin.model.vllm_versions import describe_retention, retention_default
    from simulator.twin.spec_decode.ngram import ModelDraftSpec
    e = pm.engine
    keep = e.prefix_cache_retention_interval
    default = retention_default(e.vllm_version, eagle_drafter=isinstance(
        pm.spec, ModelDraftSpec) and pm.spec.kind == "mtp")
    why = default.reason if keep == default.interval else "set explicitly"
    hybrid = "" if pm.model.is_hybrid else "; no effect: not a hybrid"
    return (f"{pm.hardware.name} × {pm.model.name}: imitates vLLM {e.vllm_version}; hybrid "
            f"state retention (prefix_cache_retention_interval) {describe_retention(keep)}: "
            f"{why}{hybrid}")


def roofline_line(pm: Any) -> str:
    """How the twin combines a step's memory and compute times on this card."""
    o = pm.efficiency.eta_overlap
    if o >= 1.0:
        how = "the longer of its memory and compute times (eta_overlap 1: a GPU overlaps them)"
    else:
        how = (f"the longer of its memory and compute times plus {1.0 - o:.2g} × the "
               f"shorter (eta_overlap {o:g}: the cores stream weights and compute in turn; "
               f"measured on vLLM CPU, see the profile's source)")
    return f"{pm.hardware.name}: a step takes {how}"


def _print_memory(console: Console, pm: RooflinePerfModel) -> None:
    """The KV pool and what vLLM keeps out of it, term by term (`twin/model/memory`)."""
    gib = float(2**30)
    util = pm.engine.gpu_memory_utilization
    pool = pm.kv_capacity_tokens() * pm.kv_bytes_per_token / gib
    mem = pm.memory_terms()
    if mem is None:
        how = ("a fixed KV budget" if pm.hardware.kv_cache_bytes is not None else
               f"utilisation × memory − weights ({pm.weights_per_gpu / gib:.2f} GiB) − "
               f"reserve_bytes ({pm.efficiency.reserve_bytes / gib:.2f} GiB, fitted)")
        console.print(f"KV pool: {pool:.2f} GiB per GPU, {how}", highlight=False,
                      markup=False)
        return
    table = Table(title=f"{pm.hardware.name} × {pm.model.name}: memory vLLM keeps out of "
                        f"the KV cache, per GPU (utilisation {util})")
    for col in ("term", "GiB", "source"):
        table.add_column(col, overflow="fold")
    table.add_row("budget", f"{mem.budget_bytes / gib:.2f}", "utilisation × memory_bytes")
    for t in mem.terms:
        table.add_row(t.name, f"{t.bytes / gib:.2f}", t.source)
    table.add_row("available KV", f"{mem.available / gib:.2f}",
                  f"budget − the terms (vLLM's 'Available KV cache memory'); "
                  f"{pm.kv_capacity_tokens():,} tokens in whole blocks ({pool:.2f} GiB)")
    console.print(table)


@twin_group.command(name="show")
@click.argument("twin", required=False, metavar="[HARDWARE/MODEL]")
@click.option("--hardware", default=",".join(SHOW_CARDS), show_default=True,
              help="comma-separated card profiles (names or YAML paths)")
@click.option("--model", default="qwen3-coder-30b-a3b-awq", show_default=True,
              help="model profile")
@click.option("--spec", default="ngram:5", show_default=True,
              help="speculation setting the terms are valued for")
@click.option("--context", type=click.IntRange(min=1), default=3000, show_default=True,
              help="context (tokens) at which the per-sequence terms are shown")
@click.option("--vllm-version", "vllm_version", default=None, metavar="X.Y",
              help="the vLLM release the twin imitates  [default: the profile's, 0.32]")
@click.option("--tp", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="a replica of this many GPUs in tensor parallel: its terms are shown")
@click.option("--ep", is_flag=True, help="with --tp: MoE experts split whole (EP)")
def show_command(twin: str | None, hardware: str, model: str, spec: str, context: int,
                 vllm_version: str | None = None, tp: int = 1, ep: bool = False) -> None:
    """Speculation's cost terms per card: value, formula, and whether each is derived,
    fitted on the card, the card's own, or borrowed; and the vLLM release imitated with
    the defaults it sets. `endurance twin show a40/qwen3-coder-30b-a3b-awq` shows one
    twin (as --twin names it) instead of --hardware × --model."""
    from simulator.twin.model.perf_model import build_perf_model
    from simulator.twin.model.profiles import kernel_family, parse_twin
    from simulator.twin.model.spec_terms import spec_terms
    from simulator.twin.model.term_sources import term_sources
    if twin:
        hardware, model = parse_twin(twin)
    console = Console()
    over: dict[str, Any] = {"vllm_version": vllm_version} if vllm_version is not None else {}
    if tp > 1 or ep:
        over.update(tensor_parallel_size=tp, enable_expert_parallel=ep)
    for card in [c.strip() for c in hardware.split(",") if c.strip()]:
        pm = build_perf_model(card, model, spec=spec, overrides=over)
        longest = pm.model.context_length
        if longest is not None and context > longest:
            raise InputError(f"--context {context:,}: past {pm.model.name}'s context length "
                             f"({longest:,} tokens); no sequence of it runs that long")
        console.print(version_line(pm), highlight=False, markup=False)
        console.print(roofline_line(pm), highlight=False, markup=False)
        console.print(f"{pm.hardware.name} terms: {pm.efficiency_source}", highlight=False,
                      markup=False)
        terms = Table(title=f"{pm.hardware.name} × {pm.model.name}: card and kernel terms")
        for col in ("term", "of", "value", "source"):
            terms.add_column(col, overflow="fold")
        for ts in term_sources(pm.hardware, kernel_family(pm.model, pm.quantization)):
            terms.add_row(ts.term, ts.kind, f"{ts.value:.4g}", ts.source)
        console.print(terms)
        _print_memory(console, pm)
        table = Table(title=f"{pm.hardware.name} × {pm.model.name}, {spec}: speculation terms")
        for col in ("term", "value", "status", "formula", "source"):
            table.add_column(col, overflow="fold")
        for t in spec_terms(pm, context):
            table.add_row(t.name, t.value, t.status, t.formula, t.source)
        console.print(table)
        if tp > 1:
            from simulator.twin.model.parallel_terms import parallel_terms
            par = Table(title=f"{pm.hardware.name} × {pm.model.name}, TP {tp}"
                              f"{' + EP' if ep else ''}: parallel terms")
            for col in ("term", "value", "status", "formula", "source"):
                par.add_column(col, overflow="fold")
            for t in parallel_terms(pm):
                par.add_row(t.name, t.value, t.status, t.formula, t.source)
            console.print(par)
