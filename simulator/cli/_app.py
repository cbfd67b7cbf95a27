"""The root click group and the error → exit-code mapping shared by every command."""

from __future__ import annotations

import sys
from typing import Any

import click

from simulator import __version__
from simulator.errors import EnduranceError
from simulator.util.redact import redact_text


class _Group(click.Group):
    """Turns our exceptions into one line on stderr and the right exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EnduranceError as exc:
            # One line, whatever the message quotes (YAML problems span lines).
            line = " ".join(redact_text(str(exc)).split())
            click.echo(f"error: {line}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            # Ctrl-C before a run's own handling (start-up, a pre-flight): one line and
            # 130, as a run interrupted later ends — not click's "Aborted!" and exit 1
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            # One line naming the bad value, not click's usage block (exit 2 either way).
            sub = exc.ctx.command_path if exc.ctx is not None else "endurance"
            click.echo(f"error: {exc.format_message()} (see `{sub} --help`)", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="endurance")
def main() -> None:
    """endurance: agentic endurance simulator for LLM serving endpoints.

    Replays Claude-Code-style sessions (hundreds of turns, tool results, live
    compaction) against an Anthropic Messages or OpenAI Chat Completions endpoint
    (--api openai-chat), or against the built-in
    simulated vLLM engine (the twin) when no --endpoint is given.
    """
