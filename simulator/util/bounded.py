"""Bounded reading of untrusted files: one place for the limits every reader shares.

A trace, a points file or a run's journal comes from outside and may be hostile: a
FIFO with no writer (a read that never returns), a device that never ends
(`/dev/zero`), a 5,000-digit integer (`ValueError` from the stdlib's int parser), a
number that overflows to infinity (`1e400`, `Infinity`), a key given twice (JSON keeps
the last, silently), nesting 100,000 deep (`RecursionError`), one line of a gigabyte.
Each is refused here with one line naming the file, the record and the field, before
it can cost more than a bounded amount of time or memory:

* `regular_file(path)`: anything but a regular file (FIFO, device, socket, folder) is
  refused at once, from its `stat`, before it is opened;
* `json_value(text)` / `DECODER`: the stdlib's decoder with `Infinity`/`NaN`, floats
  that overflow, duplicate member names and nesting deeper than `MAX_DEPTH` refused
  (`JSONLimit`, a `ValueError` that is not a `JSONDecodeError`, so a streaming reader
  never mistakes it for "read more");
* `read_line(fh, limit)`: one line of at most `limit` characters;
* `count`, `seconds`, `text`: one field of a record, checked for type (a bool is not a
  number), finiteness and its range, in its unit.

Pure apart from `regular_file` (one `stat`) and `read_line` (reads the handle given).
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, NoReturn

from simulator.errors import InputError
from simulator.util.jsontypes import JSONValue

MAX_DEPTH = 64                     # JSON nesting: a trace row is 3 deep, a points file 4
MAX_INT_DIGITS = 4300              # the stdlib's own limit (sys.int_info.default_max_str_digits)


class JSONLimit(ValueError):
    """A JSON value past one of this module's bounds (not a syntax error)."""


class FieldError(ValueError):
    """A field outside its type or range; the message names the field and what it holds."""


def regular_file(path: Path, what: str = "file") -> None:
    """OSError-free check that `path` is a regular file; ValueError with the reason
    otherwise (a FIFO would block its reader forever, a device never ends)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ValueError(f"no such {what}") from None
    except OSError as exc:
        raise ValueError(f"cannot read {what} ({exc.strerror or type(exc).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ValueError(f"{kind}, not a regular {what}")


def text_file(path: Path, what: str, max_bytes: int, *, refusal: str = "") -> str:
    """The UTF-8 text of a file a user names (a points file, a published CSV, a benchmark
    result, a twin profile, an exchanges file): an InputError of one line naming the file
    when it is not a regular file, larger than `max_bytes` (read at most that much, even
    if it grew since), not UTF-8 or unreadable. `refusal` ends the size and encoding
    lines (": not a profile")."""
    try:
        regular_file(path, what)
        if path.stat().st_size > max_bytes:
            raise ValueError(f"larger than {max_bytes >> 20} MiB{refusal}")
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise ValueError(f"larger than {max_bytes >> 20} MiB{refusal}")
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start:,}){refusal}") from None
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} "
                         f"({exc.strerror or type(exc).__name__})") from None


def is_special(path: Path) -> bool:
    """True when `path` exists and is neither a regular file nor a folder (a FIFO, a
    device node, a socket): never to be opened for writing or replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _constant(name: str) -> NoReturn:
    raise JSONLimit(f"{name} is not a finite number")


def _float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise JSONLimit(f"{s[:40]} is not a finite number")
    return x


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise JSONLimit(f"field {k[:60]!r} given twice")
            seen.add(k)
    return d


DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_constant,
                           object_pairs_hook=_pairs)
# For records whose every number is then checked by field (`count`, `seconds`): a
# non-finite number reaches the field check, whose line names the field.
FIELD_DECODER = json.JSONDecoder(object_pairs_hook=_pairs)


def depth(value: object, limit: int = MAX_DEPTH) -> None:
    """JSONLimit when `value` nests lists/objects deeper than `limit`."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items: Iterable[object] = v.values()
        elif isinstance(v, list):
            items = v
        else:
            continue
        if d > limit:
            raise JSONLimit(f"nested deeper than {limit} levels")
        stack.extend((x, d + 1) for x in items if isinstance(x, dict | list))


def decode_error(exc: Exception) -> str:
    """What a failed bounded decode means, in a few words (no traceback text)."""
    if isinstance(exc, JSONLimit):
        return str(exc)
    if isinstance(exc, RecursionError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return f"an integer of more than {MAX_INT_DIGITS} digits"
    return f"not JSON ({type(exc).__name__})"


def json_value(text: str, *, finite: bool = True, max_depth: int = MAX_DEPTH) -> JSONValue:
    """One JSON document under this module's bounds; JSONLimit / JSONDecodeError /
    ValueError (too many digits) / RecursionError otherwise — `decode_error` words it.
    `finite=False`: non-finite numbers pass, for a caller that checks every field."""
    dec = DECODER if finite else FIELD_DECODER
    value: JSONValue
    value, end = dec.raw_decode(text, len(text) - len(text.lstrip()))
    if text[end:].strip():
        raise JSONLimit(f"data after the JSON value (column {end + 1})")
    depth(value, max_depth)
    return value


def json_object(text: str, where: str, *, what: str = "a JSON object", finite: bool = True,
                show: bool = False) -> dict[str, object]:
    """One JSON object (`json_value`), or an InputError "where: why" on one line: the
    decode error worded, or "expected `what`" (with what it got, when `show`)."""
    value: object       # a JSON object is handed on as `dict[str, object]`
    try:
        value = json_value(text, finite=finite)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: {decode_error(exc)}") from None
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected {what}" + (f", got {shown(value)}" if show else ""))
    return value


RUN_FILE_DEPTH = 2 * MAX_DEPTH     # a manifest embeds a scenario (itself up to MAX_DEPTH deep)
MAX_JSON_FILE_BYTES = 256 << 20   # a run folder's JSON file: a manifest is < 1 MB, a sweep's
                                  # table of points a few MB; past this it is not one we wrote


def json_file(path: Path, *, what: str = "file", max_bytes: int = MAX_JSON_FILE_BYTES,
              finite: bool = False) -> Any:
    """The JSON document in `path` under this module's bounds, for every file of a run
    folder (manifest.json, summary.json, size.json, sweep.json, …): an InputError of one
    line naming the file when it is missing, not a regular file, larger than `max_bytes`,
    not UTF-8, not JSON, or past a bound (a 5,000-digit integer, 100,000-deep nesting).
    `finite=False` (the default): `NaN`/`Infinity` pass, as our own writer emits them."""
    try:
        if is_special(path):
            regular_file(path, what)       # its reason, e.g. "a FIFO, not a regular …"
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except ValueError as exc:
        raise InputError(f"{path}: not a regular file ({exc})") from None
    except FileNotFoundError:
        raise InputError(f"{path}: missing") from None
    except OSError as exc:
        raise InputError(f"{path}: unreadable: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > max_bytes:
        raise InputError(f"{path}: more than {max_bytes:,} bytes, more than a {what} holds")
    try:
        return json_value(raw.decode("utf-8"), finite=finite, max_depth=RUN_FILE_DEPTH)
    except UnicodeDecodeError:
        raise InputError(f"{path}: unreadable: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: corrupted JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: corrupted JSON: nested deeper than {RUN_FILE_DEPTH} "
                         "levels") from None
    except ValueError as exc:
        raise InputError(f"{path}: corrupted JSON: {decode_error(exc)}") from None


def json_row(line: str) -> Any:
    """One JSONL row under this module's bounds (NaN/Infinity pass, as our writer emits
    them); ValueError or RecursionError otherwise, which `decode_error` words."""
    return json_value(line, finite=False, max_depth=RUN_FILE_DEPTH)


def read_line(fh: IO[str], limit: int) -> str | None:
    """The next line (with its newline), None at the end; JSONLimit when a line holds
    more than `limit` characters (read at most `limit + 1` of them)."""
    line = fh.readline(limit + 1)
    if not line:
        return None
    if len(line) > limit and not line.endswith("\n"):
        raise JSONLimit(f"a line longer than {limit:,} characters")
    return line


def shown(v: object) -> str:
    """A value as JSON, cut to 40 characters (for a refusal's line)."""
    return _shown(v)


def _shown(v: object) -> str:
    try:
        s = json.dumps(v)[:41]
    except (TypeError, ValueError):
        s = repr(v)[:41]
    return s if len(s) <= 40 else s[:37] + "..."


def count(v: object, field: str, unit: str, lo: int, hi: int) -> int:
    """An integer in [lo, hi] `unit` (a bool or a float is not one)."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise FieldError(f"field {field!r}: expected a whole number of {unit}, got {_shown(v)}")
    if not lo <= v <= hi:
        digits = len(str(abs(v))) if abs(v) < 10 ** 30 else 31
        shown = f"a {digits}{'+' if digits > 30 else ''}-digit number of" if digits > 15 \
            else f"{v:,}"
        raise FieldError(f"field {field!r}: {shown} {unit}, not within [{lo:,}, {hi:,}]")
    return v


def seconds(v: object, field: str, hi: float, unit: str = "s") -> float:
    """A finite, non-negative number at most `hi` (in `unit`)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise FieldError(f"field {field!r}: expected a non-negative number of {unit}, "
                         f"got {_shown(v)}")
    if isinstance(v, int) and abs(v) >= 10 ** 30:
        raise FieldError(f"field {field!r}: a number of 31+ digits of {unit} is more "
                         f"than {hi:,.0f} {unit}")
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise FieldError(f"field {field!r}: expected a finite, non-negative number of {unit}, "
                         f"got {_shown(v)}")
    if x > hi:
        raise FieldError(f"field {field!r}: {x:g} {unit} is more than {hi:,.0f} {unit}")
    return x


def text(v: object, field: str, max_chars: int) -> str:
    """A string of at most `max_chars` characters."""
    if not isinstance(v, str):
        raise FieldError(f"field {field!r}: expected a string, got {_shown(v)}")
    if len(v) > max_chars:
        raise FieldError(f"field {field!r}: {len(v):,} characters (at most {max_chars:,})")
    return v
