"""One exception tree for the whole tool.

`InputError` means the user gave us something we cannot use (exit code 2);
`RunError` means a run failed at run time (exit code 1). Messages are one line and
name what and where (file, line, key path), because the CLI prints them verbatim.
"""

from __future__ import annotations


class EnduranceError(Exception):
    """Base of every error the tool raises on purpose."""

    exit_code = 1


class InputError(EnduranceError):
    """Bad input: a scenario, an override, a profile name, a results directory."""

    exit_code = 2


class ScenarioError(InputError):
    """A scenario file or override that does not validate."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 key_path: str | None = None) -> None:
        self.file, self.line, self.key_path = file, line, key_path
        where = ""
        if file:
            where = f"{file}:{line}" if line is not None else file
        if key_path:
            where = f"{where} {key_path}" if where else key_path
        super().__init__(f"{where}: {message}" if where else message)


class RunError(EnduranceError):
    """A run could not complete (unreachable endpoint, too many failed sessions …)."""

    exit_code = 1


class Interrupted(EnduranceError):
    """Ctrl-C/SIGTERM ended a search or sweep before its answer: no answer (exit 130)."""

    exit_code = 130
