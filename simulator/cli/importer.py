"""CLI: `endurance import claude-code PATH... -o scenarios/NAME.yaml`."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import click

from simulator.cli._app import main
from simulator.errors import InputError
from simulator.util.formats import percent


@main.group("import")
def import_group() -> None:
    """Turn real agent session transcripts into replay scenarios."""


@import_group.command("claude-code")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
              help="Scenario file to write (YAML).")
@click.option("--keep-content", is_flag=True,
              help="Store the VERBATIM text (source, paths, secrets) instead of synthetic text.")
@click.option("--system-file", type=click.Path(path_type=Path),
              help="System prompt file (the transcript lacks it); default: 3,000 synthetic tokens.")
@click.option("--tools-file", type=click.Path(path_type=Path),
              help="Tool definitions file; default: 16,000 tokens of synthetic schemas.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--strict", is_flag=True,
              help="A malformed line is an error (exit 2), and anything dropped — records off "
                   "the conversation, responses not imported, unanswered tool calls — fails "
                   "the import (exit 1, nothing written). Default: skip and count.")
@click.option("--force", is_flag=True,
              help="Overwrite an existing output file (never one of the inputs).")
@click.option("--hidden-thinking",
              type=click.Choice(["match-visible", "fresh", "like-visible"]),
              default="match-visible", show_default=True,
              help="How the twin synthesises output the transcript hides (redacted "
                   "thinking): paced so the whole reply runs at the visible text's tokens "
                   "per forward pass (match-visible; like-visible is its earlier name), "
                   "or as fresh text.")
def claude_code(paths: tuple[Path, ...], out: Path, keep_content: bool, system_file: Path | None,
                tools_file: Path | None, seed: int, strict: bool, force: bool,
                hidden_thinking: Literal["match-visible", "fresh", "like-visible"]
                = "match-visible") -> None:
    """Import Claude Code transcripts: files or project folders
    (~/.claude/projects/<project>/, with <session>/subagents/agent-*.jsonl)."""
    from simulator.importers import import_claude_code, lost, scenario_yaml
    from simulator.importers.claude_code import transcript_files
    for opt, f in (("--system-file", system_file), ("--tools-file", tools_file)):
        if f is not None and not f.is_file():
            raise InputError(f"{f}: {opt}: expected an existing file")
    check_output(out, [f for f, _ in transcript_files(list(paths))]
                 + [p for p in (system_file, tools_file) if p is not None], force)
    res = import_claude_code(list(paths), out_path=out, keep_content=keep_content,
                             system_file=system_file, tools_file=tools_file, seed=seed,
                             strict=strict, hidden_thinking=hidden_thinking)
    if strict and lost(res.summary):
        click.echo(format_import_summary(res.summary, None, keep_content))
        click.echo(f"error: --strict: {lost(res.summary)} record(s)/call(s) dropped or unpaired; "
                   f"nothing written to {out}", err=True)
        sys.exit(1)
    write_atomically(out, scenario_yaml(res.data))
    click.echo(format_import_summary(res.summary, out, keep_content))


def check_output(out: Path, inputs: list[Path], force: bool) -> None:
    """Never destroy input: the output may not be an input, nor any existing file
    unless `force`, nor a folder."""
    target = out.resolve()
    for p in inputs:
        if p.resolve() == target:
            raise InputError(f"{out}: the output is one of the inputs; choose another -o path")
    if out.is_dir():
        raise InputError(f"{out}: is a folder; -o expects a scenario file path (.yaml)")
    from simulator.util.bounded import is_special
    if is_special(out):     # never rename a file over a device node, a FIFO, a socket
        raise InputError(f"{out}: not a regular file (a device, FIFO or socket); -o "
                         "expects a scenario file path (.yaml)")
    if out.exists() and not force:
        raise InputError(f"{out}: already exists; choose another -o path or pass --force")


def write_atomically(out: Path, text: str, data: dict[str, Any] | None = None) -> None:
    """Write beside the target, validate what was written, then rename over it: a
    crash or a bad scenario never leaves a half-written or invalid file at `out`.
    `data`: the plain data `text` dumps, already validated in memory (the trace
    importers): only the file limits are checked, on it, instead of parsing the file
    back (the YAML parse was two thirds of a 10,000-request import)."""
    from simulator.scenario.load import check_data_limits, load_scenario
    if data is not None:
        check_data_limits(data, len(text.encode("utf-8")), str(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise InputError(f"{out}: cannot write scenario ({exc.strerror})") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if data is None:
            load_scenario(tmp)   # validate what was written, as `run` will read it
        os.replace(tmp, out)
    except OSError as exc:
        raise InputError(f"{out}: cannot write scenario ({exc.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)


def format_import_summary(s: dict[str, Any], out: Path | None, keep_content: bool) -> str:
    lines = [
        f"read {s['files']} file(s), {s['records']} records: {s['sessions']} session(s), "
        f"{s['subagents']} sub-agent(s), {s['calls']} calls "
        f"({s['calls_without_usage']} without usage), {s['compactions']} compaction(s)",
        f"calls imported {s['calls']} of {s['calls_found']} found; tool calls {s['tool_calls']}, "
        f"results paired {s['tool_results_paired']}"
        + (f", UNANSWERED {s['tool_calls_unanswered']}" if s["tool_calls_unanswered"] else "")
        + f"; compactions found {s['compactions_found']}, replayed {s['compactions']}",
        f"context per call vs recorded (input + cache read + cache creation), "
        f"{s['context_error_points']} calls: error median {percent(s['context_error_median'])}, "
        f"max {percent(s['context_error_max'])}, bias {percent(s['context_error_bias'])}",
        f"tokens: prompt {s['prompt_tokens_total']:,} total (max {s['prompt_tokens_max']:,}), "
        f"output {s['output_tokens_total']:,}; time span {s['time_span_s']:,.0f} s",
        f"fit: token scale {s['token_scale']} (replay tokens per cl100k token), thinking "
        f"{'kept' if s['thinking_in_context'] else 'dropped'} in context, rms error "
        f"{s['fit_rms_share']:.1%}; prefix (system + tools) {s['prefix_tokens']:,} tokens"
        + (f"; sub-agent prefixes {', '.join(f'{p:,}' for p in s['subagent_prefix_tokens'])}"
           if s["subagent_prefix_tokens"] else ""),
    ]
    if s.get("ngram_reference_tokens_per_pass") is not None:
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in s["ngram_reference_by_kind"].items())
        lines.append(f"predictability of the visible assistant text: "
                     f"{s['ngram_reference_tokens_per_pass']:.2f} tokens per forward pass at "
                     f"{s['ngram_reference']} ({kinds}); hidden output "
                     f"{percent(s['hidden_output_share'])} of the recorded, replayed as "
                     + ("fresh text" if s.get("hidden_thinking") == "fresh" else
                        "text at the visible rate"))
    if s["dropped"]:
        lines.append("DROPPED: " + ", ".join(f"{k} {v}" for k, v in s["dropped"].items()))
    if s["skipped"]:
        lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in s["skipped"].items()))
    if s["malformed_at"]:
        lines.append("malformed lines at: " + ", ".join(s["malformed_at"]))
    if out is not None:
        lines.append(f"wrote {out} (validated)")
    if keep_content:
        lines.append("WARNING: the scenario contains VERBATIM transcript content "
                     "(source, paths, secrets). Do not share it.")
    else:
        lines.append("anonymised: structure and token sizes only; no original text.")
    return "\n".join(lines)


@import_group.command("weka")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
              help="Scenario file to write (YAML).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
def weka(paths: tuple[Path, ...], out: Path, seed: int, force: bool) -> None:
    """Import Weka / SemiAnalysis cc-traces (FILE or folders of *.json): sizes, timings,
    sub-agents and the prefix sharing their hash ids imply. A bad file in a folder is
    reported and skipped."""
    from simulator.importers.trace_import import format_summary, import_weka
    from simulator.importers.weka import trace_files
    check_output(out, list(trace_files(list(paths))), force)
    res = import_weka(list(paths), out_path=out, seed=seed)
    write_atomically(out, trace_yaml(res.data, "cc-traces"), res.data)
    click.echo(format_summary(res.summary, out, res.file_errors))


@import_group.command("mooncake")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
              help="Scenario file to write (YAML).")
@click.option("--block-size", type=click.IntRange(1, 1 << 20), default=512,
              show_default=True, help="Tokens per hash id (Mooncake: 512).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
def mooncake(path: Path, out: Path, block_size: int, seed: int, force: bool) -> None:
    """Import a Mooncake JSONL trace (timestamp, input_length, output_length, hash_ids;
    Dynamo's session_id/delay rows become closed-loop sessions)."""
    from simulator.importers.trace_import import format_summary, import_mooncake
    check_output(out, [path], force)
    res = import_mooncake(path, out_path=out, seed=seed, block_size=block_size)
    write_atomically(out, trace_yaml(res.data, "Mooncake"), res.data)
    click.echo(format_summary(res.summary, out, res.file_errors))


def trace_yaml(data: dict[str, Any], fmt: str,
               what: str = "trace: sizes, timings and hash-implied prefix sharing") -> str:
    import yaml
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return (f"# Imported from a {fmt} {what}; "
            f"every text is seeded synthetic content.\n"
            + yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=None, width=100))


def _team_command(source: str, doc: str) -> None:
    @import_group.command(source, help=doc)
    @click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
    @click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
                  help="Scenario file to write (YAML).")
    @click.option("--window", metavar="HH:MM-HH:MM", default=None,
                  help="Replay this slice of the day (UTC), e.g. 10:00-11:00.")
    @click.option("--busiest", metavar="TIME", default=None,
                  help="Replay the busiest TIME of the day (most requests), e.g. 1h.")
    @click.option("--scale", type=float, default=1.0, show_default=True,
                  help="Replay the team × this factor (sessions resampled, seeded).")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--force", is_flag=True, help="Overwrite an existing output file.")
    def command(paths: tuple[Path, ...], out: Path, window: str | None, busiest: str | None,
                scale: float, seed: int, force: bool) -> None:
        from simulator.importers.otlp_read import otlp_files
        from simulator.importers.team_import import format_team_summary, import_team
        from simulator.util.durations import parse_duration_s
        check_output(out, otlp_files(list(paths)), force)
        res = import_team(list(paths), source,  # type: ignore[arg-type]
                          out_path=out, seed=seed, window=window,
                          busiest_s=None if busiest is None
                          else parse_duration_s(busiest, "--busiest"), scale=scale)
        write_atomically(out, trace_yaml(res.data, source, "export: the team's requests at "
                                         "their recorded times, sizes and cache split"),
                         res.data)
        click.echo(format_team_summary(res.summary, out))


_team_command("claude-code-otel",
              "Import Claude Code's OpenTelemetry events (OTLP JSON lines or protobuf, as a "
              "Collector's file exporter writes them; FILE or folders) into a team replay: "
              "one stream per session.id and query source, each request at its recorded "
              "time with its recorded sizes. Sizes only; prompt texts are dropped.")
_team_command("otel-genai",
              "Import OpenTelemetry GenAI spans (gen_ai.usage.*, gen_ai.conversation.id; "
              "OTLP JSON lines or protobuf) into a team replay: one stream per "
              "conversation, each request at its recorded time with its recorded sizes.")
