"""`endurance check`: does an endpoint speak the Anthropic Messages API the way a
coding agent needs it (streaming grammar, usage, cache fields, tools, errors, metrics)?

`run_check(url)` returns a `CheckReport` of pass / warn / fail lines; the CLI prints it.
"""

from typing import TYPE_CHECKING

from simulator.check.report import CheckReport, CheckResult, Status

DEFAULT_TIMEOUT_S = 120.0

if TYPE_CHECKING:
    from simulator.check.runner import run_check, run_check_async, validate_base_url

_RUNNER = frozenset({"run_check", "run_check_async", "validate_base_url"})


def __getattr__(name: str) -> object:
    """The runner (and aiohttp with it) is imported on first use, not with the package:
    every `endurance` command imports this package to register `check`."""
    if name in _RUNNER:   # deferred: aiohttp, only when a check runs (see above)
        from simulator.check import runner
        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_TIMEOUT_S", "CheckReport", "CheckResult", "Status", "run_check",
           "run_check_async", "validate_base_url"]
