"""`endurance check URL`: the Anthropic-API conformance check, printed as a table.

Exit codes: 0 no check failed (warnings allowed), 1 a check failed, 2 bad input.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from simulator.check import DEFAULT_TIMEOUT_S, CheckReport, Status
from simulator.cli._app import main

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


def report_table(report: CheckReport) -> Table:
    """One row per check: name, verdict, reason."""
    counts = report.counts()
    table = Table(title=f"endurance check {report.base_url} (model {report.model or '?'})",
                  caption=f"{counts['pass']} pass, {counts['warn']} warn, "
                          f"{counts['fail']} fail in {report.elapsed_s:.1f} s",
                  show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for r in report.results:
        table.add_row(r.name, f"[{_STYLE[r.status]}]{r.status.value}[/]", r.reason)
    return table


@main.command("check")
@click.argument("url")
@click.option("--model", help="Model name to send (default: the first of /v1/models).")
@click.option("--api-key", envvar="ANTHROPIC_API_KEY", help="Sent as x-api-key and Bearer.")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_TIMEOUT_S,
              show_default=True, help="Seconds allowed per HTTP request.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--api", type=click.Choice(["anthropic", "openai-chat"]), default="anthropic",
              show_default=True, help="Protocol to check: Anthropic Messages or OpenAI "
              "Chat Completions (/v1/chat/completions).")
@click.pass_context
def check_cmd(ctx: click.Context, url: str, model: str | None, api_key: str | None,
              timeout_s: float, as_json: bool, api: str) -> None:
    """Check that URL speaks the Anthropic Messages API the way coding agents need:
    streaming grammar, usage and cache fields, tools, count_tokens, errors, /metrics.
    With --api openai-chat: Chat Completions (usage in the stream, streamed tool calls,
    cached_tokens, error bodies, context-overflow errors)."""
    from simulator.check import run_check, validate_base_url  # aiohttp: only when checking
    validate_base_url(url)
    report = run_check(url, api_key=api_key, model=model, timeout_s=timeout_s, api=api)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        Console(soft_wrap=False).print(report_table(report))
    ctx.exit(0 if report.ok else 1)
