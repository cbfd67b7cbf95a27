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
from simulator.errors import RunError

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
@click.option("--api-key", envvar="ANTHROPIC_API_KEY", help="Sent as x-api-key and Bearer "
              "(default $ANTHROPIC_API_KEY; on the command line it shows in `ps`: prefer the "
              "variable or --api-key-file).")
@click.option("--api-key-file", type=click.Path(dir_okay=False), default=None,
              help="Read the key from the first line of this file.")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_TIMEOUT_S,
              show_default=True, help="Seconds the whole check may take (each "
              "request at most this; checks left when it is spent fail as not run).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--against", "against", metavar="URL2",
              help="Instead: send the same greedy code probes to URL and URL2 (e.g. the "
              "same model with and without speculation) and diff every differing reply.")
@click.option("--api", type=click.Choice(["anthropic", "openai-chat"]), default="anthropic",
              show_default=True, help="Protocol to check: Anthropic Messages or OpenAI "
              "Chat Completions (/v1/chat/completions).")
@click.option("--recall", is_flag=True, help="Instead: the long-context recall check, a "
              "code word hidden at each depth of a haystack of agent-like content.")
@click.option("--lengths", default="4k,16k,64k", show_default=True,
              help="--recall: haystack sizes in tokens (0.5k, 4k, 3000, 1m).")
@click.option("--depths", default="0.1,0.5,0.9", show_default=True,
              help="--recall: where the fact sits, as fractions of the haystack.")
@click.option("--repeats", type=int, default=1, show_default=True,
              help="--recall: cases per (length, depth), each with its own haystack.")
@click.pass_context
def check_cmd(ctx: click.Context, url: str, model: str | None, api_key: str | None,
              api_key_file: str | None, timeout_s: float, as_json: bool,
              against: str | None, api: str, recall: bool, lengths: str, depths: str,
              repeats: int) -> None:
    """Check that URL speaks the Anthropic Messages API the way coding agents need:
    streaming grammar, usage and cache fields, tools, count_tokens, errors, /metrics.
    With --api openai-chat: Chat Completions (usage in the stream, streamed tool calls,
    cached_tokens, error bodies, context-overflow errors).

    With --against URL2: exit 0 when every probe's replies are identical, 1 when any
    differ or fail. With --recall: a table of recall by length x depth; exit 0 when
    any case ran, 1 when none could."""
    from simulator.check import run_check, validate_base_url  # aiohttp: only when checking
    from simulator.errors import InputError
    from simulator.run.spec import base_endpoint_url
    from simulator.util.redact import check_key, read_key_file
    url, note = base_endpoint_url(url)
    if note is not None:
        click.echo(note.replace("--endpoint", "URL"), err=True)
    validate_base_url(url)
    if not (0 < timeout_s <= 3600):
        raise InputError(f"--timeout {timeout_s}: must be within (0, 3600] seconds")
    if api_key and ctx.get_parameter_source("api_key") is click.core.ParameterSource.COMMANDLINE:
        click.echo("warning: --api-key on the command line is visible to every user (ps); "
                   "prefer $ANTHROPIC_API_KEY or --api-key-file", err=True)
    try:
        if api_key_file:
            api_key = check_key(read_key_file(api_key_file), f"--api-key-file {api_key_file}")
        elif api_key:
            api_key = check_key(api_key, "--api-key / $ANTHROPIC_API_KEY")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    given = {name for name in ("lengths", "depths", "repeats", "against", "api")
             if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT}
    if recall and "against" in given:
        raise InputError("--recall and --against are two different checks; run them one "
                         "at a time")
    if recall and api != "anthropic":
        raise InputError(f"--recall speaks Anthropic Messages only (--api {api})")
    if not recall and given & {"lengths", "depths", "repeats"}:
        flags = ", ".join(f"--{n}" for n in sorted(given & {"lengths", "depths", "repeats"}))
        raise InputError(f"{flags}: only with --recall")
    if recall:
        from simulator.cli.check_recall import run_recall_cli
        ctx.exit(run_recall_cli(url, model, api_key, timeout_s, as_json, lengths, depths,
                                repeats))
    if against is not None:
        ctx.exit(_compare(url, validate_base_url(against), model, api_key, timeout_s,
                          as_json))
    report = run_check(url, api_key=api_key, model=model, timeout_s=timeout_s, api=api,
                       wall_s=timeout_s)
    unreachable = next((r for r in report.results if r.name == "reachable"
                        and r.status is Status.FAIL), None)
    if unreachable is not None and not as_json:
        raise RunError(f"{unreachable.reason}; is the server running, and is "
                       f"{report.base_url} its base URL (without /v1/messages)?")
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        Console(soft_wrap=False).print(report_table(report))
    ctx.exit(0 if report.ok else 1)


def _compare(url: str, against: str, model: str | None, api_key: str | None,
             timeout_s: float, as_json: bool) -> int:
    """`check URL --against URL2`: print each probe's verdict and the diffs; exit code."""
    import asyncio

    from simulator.check.compare import compare_endpoints
    results = asyncio.run(compare_endpoints(url, against, model_a=model, model_b=model,
                                            api_key=api_key, timeout_s=timeout_s))
    if as_json:
        click.echo(json.dumps([{"probe": r.name, "same": r.same, "error": r.error,
                                "diff": r.diff(url, against)} for r in results], indent=2))
    else:
        for r in results:
            verdict = "same" if r.same else ("ERROR " + r.error if r.error else "DIFFERS")
            click.echo(f"{r.name:<12} {verdict}")
            if r.diff():
                click.echo(r.diff(url, against))
        bad = sum(not r.same for r in results)
        click.echo(f"{len(results) - bad} of {len(results)} probes identical "
                   f"({url} vs {against})")
    return 0 if all(r.same for r in results) else 1
