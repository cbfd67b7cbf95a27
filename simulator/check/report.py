"""The result types of `endurance check`: one line per check, pass / warn / fail.

`warn` marks a known, tolerable difference from Anthropic's API (a field a server does
not report, a usage split that arrives late); `fail` marks something a client built on
the Anthropic SDK would trip over. Only `fail` makes the command exit non-zero.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


class Status(enum.StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: its name, verdict, a one-line reason and JSON-able details."""

    name: str
    status: Status
    reason: str
    details: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": str(self.status), "reason": self.reason,
                "details": self.details}


def passed(name: str, reason: str, **details: object) -> CheckResult:
    return CheckResult(name, Status.PASS, reason, details)


def warned(name: str, reason: str, **details: object) -> CheckResult:
    return CheckResult(name, Status.WARN, reason, details)


def failed(name: str, reason: str, **details: object) -> CheckResult:
    return CheckResult(name, Status.FAIL, reason, details)


# The runner's wrappers around each check: `Guard` turns a transport failure of a step
# into that check's fail line; `One` makes a one-result check a list.
Guard = Callable[[str, Awaitable[list[CheckResult]]], Awaitable[list[CheckResult]]]
One = Callable[[Callable[[], Awaitable[CheckResult]]], Awaitable[list[CheckResult]]]


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every check run against one endpoint, in the order they ran."""

    base_url: str
    model: str
    results: tuple[CheckResult, ...]
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings are allowed)."""
        return all(r.status is not Status.FAIL for r in self.results)

    def by_name(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        return {s.value: sum(r.status is s for r in self.results) for s in Status}

    def to_dict(self) -> dict[str, object]:
        return {"base_url": self.base_url, "model": self.model, "ok": self.ok,
                "elapsed_s": round(self.elapsed_s, 3), "counts": self.counts(),
                "results": [r.to_dict() for r in self.results]}
