"""CLI: `endurance import claude-code PATH... -o scenarios/NAME.yaml`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from simulator.cli._app import main
from simulator.errors import InputError


@main.group("import")
def import_group() -> None:
    """Turn real agent session transcripts into replay scenarios."""


@import_group.command("claude-code")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
              help="Scenario file to write (YAML).")
@click.option("--keep-content", is_flag=True,
              help="Store the VERBATIM text (source, paths, secrets) instead of synthetic text.")
@click.option("--system-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="System prompt file (the transcript lacks it); default: 3,000 synthetic tokens.")
@click.option("--tools-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Tool definitions file; default: 16,000 tokens of synthetic schemas.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--strict", is_flag=True, help="A malformed line is an error (default: skip, count).")
def claude_code(paths: tuple[Path, ...], out: Path, keep_content: bool, system_file: Path | None,
                tools_file: Path | None, seed: int, strict: bool) -> None:
    """Import Claude Code transcripts: files or project folders
    (~/.claude/projects/<project>/, with <session>/subagents/agent-*.jsonl)."""
    from simulator.importers import import_claude_code, scenario_yaml
    from simulator.scenario.load import load_scenario
    res = import_claude_code(list(paths), out_path=out, keep_content=keep_content,
                             system_file=system_file, tools_file=tools_file, seed=seed,
                             strict=strict)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(scenario_yaml(res.data), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write scenario ({exc.strerror})") from None
    load_scenario(out)   # validate what was written, as `run` will read it
    click.echo(format_import_summary(res.summary, out, keep_content))


def format_import_summary(s: dict[str, Any], out: Path, keep_content: bool) -> str:
    lines = [
        f"read {s['files']} file(s), {s['records']} records: {s['sessions']} session(s), "
        f"{s['subagents']} sub-agent(s), {s['calls']} calls "
        f"({s['calls_without_usage']} without usage), {s['compactions']} compaction(s)",
        f"tokens: prompt {s['prompt_tokens_total']:,} total (max {s['prompt_tokens_max']:,}), "
        f"output {s['output_tokens_total']:,}; time span {s['time_span_s']:,.0f} s",
        f"fit: token scale {s['token_scale']} (replay tokens per cl100k token), thinking "
        f"{'kept' if s['thinking_in_context'] else 'dropped'} in context, rms error "
        f"{s['fit_rms_share']:.1%}; prefix {s['prefix_tokens']:,} tokens"
        + (f" (recorded prompts suggest ~{s['fitted_prefix_tokens']:,}; "
           "see --system-file/--tools-file)" if s["fitted_prefix_tokens"] is not None else ""),
    ]
    if s["skipped"]:
        lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in s["skipped"].items()))
    if s["malformed_at"]:
        lines.append("malformed lines at: " + ", ".join(s["malformed_at"]))
    lines.append(f"wrote {out} (validated)")
    if keep_content:
        lines.append("WARNING: the scenario contains VERBATIM transcript content "
                     "(source, paths, secrets). Do not share it.")
    else:
        lines.append("anonymised: structure and token sizes only; no original text.")
    return "\n".join(lines)
