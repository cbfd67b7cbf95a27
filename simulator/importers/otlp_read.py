"""Read OTLP files as an OpenTelemetry Collector's file exporter writes them: one record
(a log record or a span) at a time, with its scalar attributes and times.

Two encodings, told apart by the first byte:

* **JSON lines** (`format: json`, the default): one `LogsData` / `TracesData` per line
  in the OTLP/JSON mapping — `resourceLogs[].scopeLogs[].logRecords[]` or
  `resourceSpans[].scopeSpans[].spans[]`, attributes as `{key, value: AnyValue}`,
  64-bit integers (`timeUnixNano`, `intValue`) as decimal strings or numbers;
* **protobuf** (`format: proto`): each message preceded by its length as a 4-byte
  big-endian unsigned integer, parsed with the `opentelemetry-proto` classes.

Bounded as every importer is (`util.bounded`): a regular file only, a line or a
message of at most MAX_MESSAGE_BYTES, JSON nesting at most `bounded.MAX_DEPTH`, a
member or an attribute key given twice refused, at most MAX_RECORDS records. Only
scalar attributes are kept (strings cut to MAX_TEXT_CHARS on use, never stored whole:
a prompt's text is not kept); a nested value (array, key/value list, bytes) is
skipped. A record's fields are checked where they are read (`attr_*`), each refusal
naming the file, the line or message, the record and the field.
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from simulator.errors import InputError
from simulator.scenario.model import MAX_TOKENS
from simulator.util import bounded
from simulator.util.numbers import is_number

if TYPE_CHECKING:   # protobuf is loaded only for a protobuf file
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

Signal = Literal["logs", "spans"]
Scalar = str | int | float | bool

MAX_EMPTY_RUN = 16              # consecutive empty protobuf messages: an exporter writes
                                # a batch only when it holds something
MAX_MESSAGE_BYTES = 16 << 20   # one line / one protobuf message (a Collector batch of
#                                8,192 Claude Code events is ~8 MiB of JSON)
MAX_RECORDS = 1_000_000        # records read from all files of one import (a team-day of
#                                100,000 requests with its tool and prompt events is ~400k)
MAX_ATTRIBUTES = 256           # per record (Claude Code sends ~20)
MAX_TEXT_CHARS = 256           # ids, names, models
MAX_NANOS = 1 << 63            # an OTLP fixed64 time the year 2262 at most
_KEYS = {"logs": ("resourceLogs", "scopeLogs", "logRecords"),
         "spans": ("resourceSpans", "scopeSpans", "spans")}


@dataclass(slots=True)
class OtlpRecord:
    """One log record or span: its name, scalar attributes (the resource's under
    them) and times in Unix nanoseconds (0: not set)."""

    name: str
    attrs: dict[str, Scalar]
    start_ns: int          # a log's timeUnixNano (else observed), a span's start
    end_ns: int            # a span's end (a log: 0)
    where: str             # "FILE: line 3, record 2" / "FILE: message 3, record 2"


def otlp_files(paths: list[Path]) -> list[Path]:
    """The files to read: given files, and each folder's regular files (sorted), not
    hidden; a path that is not a regular file is refused before any read."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(q for q in p.iterdir()
                              if q.is_file() and not q.name.startswith(".")))
            continue
        try:
            bounded.regular_file(p, "OTLP file")
        except ValueError as exc:
            raise InputError(f"{p}: {exc}") from None
        out.append(p)
    if not out:
        raise InputError(f"{', '.join(map(str, paths))}: no OTLP files")
    return out


def read_records(paths: list[Path], signal: Signal) -> Iterator[OtlpRecord]:
    """Every record of `signal` in the files, in file order; InputError (one line) on
    the first malformed one. Lines or messages of another signal (metrics) are skipped."""
    n = 0
    for path in otlp_files(paths):
        for rec in _read_file(path, signal):
            n += 1
            if n > MAX_RECORDS:
                raise InputError(f"{rec.where}: more than {MAX_RECORDS:,} records in one "
                                 "import (import a day at a time)")
            yield rec


def _read_file(path: Path, signal: Signal) -> Iterator[OtlpRecord]:
    try:
        bounded.regular_file(path, "OTLP file")
        fh = path.open("rb")
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        head = fh.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]
        fh.seek(0)
        try:
            if head == b"{":
                yield from _json_lines(path, fh, signal)
            elif head:
                yield from _proto_messages(path, fh, signal)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def signal_of(path: Path) -> Signal | None:
    """The signal of the file's first line or message: "logs" or "spans" (None: neither,
    or unreadable). Read only when an import found nothing, to name a file given to the
    wrong importer (spans to Claude Code's, events to the GenAI one)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]
            fh.seek(0)
            if head == b"{":
                raw = b""
                while not raw.strip():
                    raw = fh.readline(MAX_MESSAGE_BYTES + 1)
                    if not raw:
                        return None
                doc = bounded.json_object(raw.decode("utf-8-sig"), str(path))
                return "logs" if "resourceLogs" in doc else \
                    "spans" if "resourceSpans" in doc else None
            return _proto_signal(fh) if head else None
    except (OSError, ValueError, InputError):
        return None


def _proto_signal(fh: IO[bytes]) -> Signal | None:
    """The signal whose message class reads the first non-empty message with the most
    record attributes: a logs message read as spans parses, but as junk without them."""
    from google.protobuf.message import DecodeError
    for _ in range(MAX_EMPTY_RUN + 1):
        head = fh.read(4)
        if len(head) < 4:
            return None
        (size,) = struct.unpack(">I", head)
        if 0 < size <= MAX_MESSAGE_BYTES:
            break
    else:
        return None
    data = fh.read(size)
    best, found = 0, None
    signals: tuple[Signal, ...] = ("logs", "spans")
    for signal in signals:
        msg = _message(signal)
        try:
            msg.ParseFromString(data)
        except (DecodeError, RecursionError):
            continue
        n = sum(len(r.attributes) for r in _proto_raw_records(msg))
        if n > best:
            best, found = n, signal
    return found


def _message(signal: Signal) -> LogsData | TracesData:
    """An empty message of the signal's class."""
    from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
    return LogsData() if signal == "logs" else TracesData()


def _resources(msg: LogsData | TracesData
               ) -> Iterator[tuple[Resource, Iterator[LogRecord] | Iterator[Span]]]:
    """Each resource of a message with its log records or spans."""
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
    if isinstance(msg, TracesData):
        for rs in msg.resource_spans:
            yield rs.resource, (span for ss in rs.scope_spans for span in ss.spans)
    else:
        for rl in msg.resource_logs:
            yield rl.resource, (r for sl in rl.scope_logs for r in sl.log_records)


def _proto_raw_records(msg: LogsData | TracesData) -> Iterator[LogRecord | Span]:
    """Each log record or span of a message."""
    for _res, records in _resources(msg):
        yield from records


# --- JSON lines ------------------------------------------------------------------------

def _json_lines(path: Path, fh: IO[bytes], signal: Signal) -> Iterator[OtlpRecord]:
    lineno = 0
    while True:
        lineno += 1
        raw = fh.readline(MAX_MESSAGE_BYTES + 1)
        if not raw:
            return
        where = f"{path}: line {lineno}"
        if len(raw) > MAX_MESSAGE_BYTES and not raw.endswith(b"\n"):
            raise InputError(f"{where}: a line longer than {MAX_MESSAGE_BYTES:,} bytes")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None
        if not text.strip():
            continue
        doc = bounded.json_object(text, where, what="an OTLP/JSON object", finite=False,
                                  show=True)
        top, scope_key, rec_key = _KEYS[signal]
        if top not in doc:
            if any(k in doc for keys in _KEYS.values() for k in keys[:1]) \
                    or "resourceMetrics" in doc:
                continue                  # another signal's line (metrics, the other one)
            raise InputError(f"{where}: field '{top}': missing (not an OTLP {signal} line)")
        k = 0
        for ri, res in enumerate(_list(doc, top, where)):
            rwhere = f"{where}: {top}[{ri}]"
            res = _obj_of(res, rwhere)
            res_attrs = _json_attrs(_obj(res, "resource", rwhere).get("attributes"),
                                    f"{rwhere}.resource")
            for si, scope in enumerate(_list(res, scope_key, rwhere)):
                swhere = f"{rwhere}.{scope_key}[{si}]"
                for r in _list(_obj_of(scope, swhere), rec_key, swhere):
                    rw = f"{where}, record {k}"
                    k += 1
                    yield _json_record(_obj_of(r, rw), res_attrs, signal, rw)


def _obj_of(v: object, where: str) -> dict[str, object]:
    if not isinstance(v, dict):
        raise InputError(f"{where}: expected an object, got {bounded.shown(v)}")
    return v


def _obj(d: dict[str, object], key: str, where: str) -> dict[str, object]:
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(f"{where}: field '{key}': expected an object, got {bounded.shown(v)}")
    return v


def _list(d: dict[str, object], key: str, where: str) -> list[object]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"{where}: field '{key}': expected a list, got {bounded.shown(v)}")
    return v


def _nanos(v: object, field: str, where: str) -> int:
    """An OTLP fixed64 time: a decimal string or an integer, 0 ≤ t < 2^63 ns."""
    if v is None:
        return 0
    if isinstance(v, str) and v.removeprefix("-").isdigit() and len(v) <= 21:
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v < MAX_NANOS:
        raise InputError(f"{where}: field '{field}': {bounded.shown(v)} ns is "
                         f"{out_of_range(v)}")
    if not isinstance(v, int) or isinstance(v, bool):
        raise InputError(f"{where}: field '{field}': expected Unix nanoseconds (a whole "
                         f"number below 2^63, as a string or a number), got {bounded.shown(v)}")
    return v


def _json_any(v: object, key: str, where: str) -> Scalar | None:
    """A scalar AnyValue (None: a nested or empty one, skipped)."""
    if not isinstance(v, dict) or len(v) > 1:
        raise InputError(f"{where}: attribute {key[:60]!r}: expected an AnyValue object with "
                         f"one member, got {bounded.shown(v)}")
    if not v:
        return None
    (kind, x), = v.items()
    if kind == "stringValue" and isinstance(x, str):
        return x
    if kind == "boolValue" and isinstance(x, bool):
        return x
    if kind == "intValue":
        if isinstance(x, str) and x.lstrip("-").isdigit() and len(x) <= 20:
            return int(x)
        if isinstance(x, int) and not isinstance(x, bool):
            return x
    if kind == "doubleValue":
        if isinstance(x, str) and x in ("NaN", "Infinity", "-Infinity"):
            return float(x.replace("Infinity", "inf").replace("NaN", "nan"))
        if is_number(x):
            return float(x)
    if kind in ("arrayValue", "kvlistValue", "bytesValue"):
        return None
    raise InputError(f"{where}: attribute {key[:60]!r}: {kind[:40]!r} holding "
                     f"{bounded.shown(x)} is not an OTLP AnyValue")


def _json_attrs(v: object, where: str) -> dict[str, Scalar]:
    if v is None:
        return {}
    if not isinstance(v, list) or len(v) > MAX_ATTRIBUTES:
        raise InputError(f"{where}: field 'attributes': expected a list of at most "
                         f"{MAX_ATTRIBUTES} key/value objects, got {bounded.shown(v)}")
    out: dict[str, Scalar] = {}
    for kv in v:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise InputError(f"{where}: field 'attributes': expected {{key, value}}, got "
                             f"{bounded.shown(kv)}")
        key = kv["key"]
        if key in out:
            raise InputError(f"{where}: attribute {key[:60]!r} given twice")
        x = _json_any(kv.get("value", {}), key, where)
        if x is not None:
            out[key] = x
    return out


def _json_record(r: dict[str, object], res: dict[str, Scalar], signal: Signal,
                 where: str) -> OtlpRecord:
    attrs = {**res, **_json_attrs(r.get("attributes"), where)}
    if signal == "spans":
        name = r.get("name", "")
        return OtlpRecord(name if isinstance(name, str) else "", attrs,
                          _nanos(r.get("startTimeUnixNano"), "startTimeUnixNano", where),
                          _nanos(r.get("endTimeUnixNano"), "endTimeUnixNano", where), where)
    body = r.get("body")
    name = r.get("eventName") if isinstance(r.get("eventName"), str) else ""
    if not name and isinstance(body, dict) and isinstance(body.get("stringValue"), str):
        name = body["stringValue"]
    t = _nanos(r.get("timeUnixNano"), "timeUnixNano", where) \
        or _nanos(r.get("observedTimeUnixNano"), "observedTimeUnixNano", where)
    return OtlpRecord(str(name)[:MAX_TEXT_CHARS], attrs, t, 0, where)


# --- protobuf ----------------------------------------------------------------------------

def _proto_messages(path: Path, fh: IO[bytes], signal: Signal) -> Iterator[OtlpRecord]:
    from google.protobuf.message import DecodeError
    idx = empty = 0
    while True:
        head = fh.read(4)
        if not head:
            return
        where = f"{path}: message {idx}"
        if len(head) < 4:
            raise InputError(f"{where}: a torn length prefix ({len(head)} of 4 bytes; "
                             "expected the file exporter's format: proto)")
        (size,) = struct.unpack(">I", head)
        empty = empty + 1 if size == 0 else 0
        if empty > MAX_EMPTY_RUN:
            # a sparse or zero-filled file is one empty message per 4 bytes: a gigabyte
            # of them would be read to its end for nothing
            raise InputError(f"{where}: {empty} empty messages in a row (zero length "
                             "prefixes): a zero-filled or sparse file, not the file "
                             "exporter's format: proto")
        if size > MAX_MESSAGE_BYTES:
            raise InputError(f"{where}: a message of {size:,} bytes (at most "
                             f"{MAX_MESSAGE_BYTES:,}); not an OTLP protobuf file?")
        data = fh.read(size)
        if len(data) < size:
            raise InputError(f"{where}: torn: {len(data):,} of {size:,} bytes")
        msg = _message(signal)
        try:
            msg.ParseFromString(data)
        except (DecodeError, RecursionError) as exc:
            raise InputError(f"{where}: not an OTLP {signal} protobuf message "
                             f"({str(exc)[:80] or type(exc).__name__})") from None
        yield from _proto_records(msg, where)
        idx += 1


def _proto_any(v: AnyValue, key: str, where: str) -> Scalar | None:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return str(v.string_value)
    if kind == "bool_value":
        return bool(v.bool_value)
    if kind == "int_value":
        return int(v.int_value)
    if kind == "double_value":
        return float(v.double_value)
    return None


def _proto_attrs(kvs: Sequence[KeyValue], where: str) -> dict[str, Scalar]:
    if len(kvs) > MAX_ATTRIBUTES:
        raise InputError(f"{where}: {len(kvs):,} attributes (at most {MAX_ATTRIBUTES})")
    out: dict[str, Scalar] = {}
    for kv in kvs:
        key = str(kv.key)
        if key in out:
            raise InputError(f"{where}: attribute {key[:60]!r} given twice")
        x = _proto_any(kv.value, key, where)
        if x is not None:
            out[key] = x
    return out


def _proto_records(msg: LogsData | TracesData, where: str) -> Iterator[OtlpRecord]:
    """The message's records, each resource's attributes under its records' (checked
    once per resource, records or not)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span
    k = 0
    for res, records in _resources(msg):
        res_attrs = _proto_attrs(res.attributes, f"{where}: resource")
        for r in records:
            rw = f"{where}, record {k}"
            k += 1
            attrs = {**res_attrs, **_proto_attrs(r.attributes, rw)}
            if isinstance(r, Span):
                yield OtlpRecord(str(r.name)[:MAX_TEXT_CHARS], attrs,
                                 _nanos(int(r.start_time_unix_nano), "start_time_unix_nano", rw),
                                 _nanos(int(r.end_time_unix_nano), "end_time_unix_nano", rw), rw)
                continue
            name = str(r.event_name) or (str(r.body.string_value)
                                         if r.body.WhichOneof("value") == "string_value"
                                         else "")
            t = _nanos(int(r.time_unix_nano), "time_unix_nano", rw) \
                or _nanos(int(r.observed_time_unix_nano), "observed_time_unix_nano", rw)
            yield OtlpRecord(name[:MAX_TEXT_CHARS], attrs, t, 0, rw)


# --- one attribute, checked -------------------------------------------------------------

def _missing(rec: OtlpRecord, key: str) -> InputError:
    return InputError(f"{rec.where} ({rec.name or 'unnamed'}): attribute {key!r}: missing")


def attr_count(rec: OtlpRecord, key: str, *, default: int | None = None,
               lo: int = 0) -> int:
    """A token count: an integer (or a decimal string, or a whole double: exporters
    differ), lo … MAX_TOKENS."""
    v = rec.attrs.get(key)
    if v is None:
        if default is None:
            raise _missing(rec, key)
        return default
    if isinstance(v, str) and v.strip().isdigit() and len(v) <= 20:
        v = int(v)
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    try:
        return bounded.count(v, key, "tokens", lo, MAX_TOKENS)
    except bounded.FieldError as exc:
        raise InputError(f"{rec.where} ({rec.name}): attribute {str(exc)[6:]}") from None


def attr_seconds(rec: OtlpRecord, key: str, scale: float, hi_s: float) -> float | None:
    """A duration attribute in seconds (`scale`: seconds per unit, 1e-3 for ms), finite,
    0 … hi_s; None when absent."""
    v = rec.attrs.get(key)
    if v is None:
        return None
    if isinstance(v, str) and len(v) <= 40:
        with contextlib.suppress(ValueError):
            v = float(v)
    unit = "ms" if scale == 1e-3 else "s"
    try:
        return bounded.seconds(v, key, hi_s / scale, unit) * scale
    except bounded.FieldError as exc:
        raise InputError(f"{rec.where} ({rec.name}): attribute {str(exc)[6:]}") from None


def attr_text(rec: OtlpRecord, key: str, *, required: bool = False) -> str | None:
    """A short string attribute (an integer id reads as its decimal text)."""
    v = rec.attrs.get(key)
    if v is None or v == "":
        if required:
            raise _missing(rec, key)
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    try:
        return bounded.text(v, key, MAX_TEXT_CHARS)
    except bounded.FieldError as exc:
        raise InputError(f"{rec.where} ({rec.name}): attribute {str(exc)[6:]}") from None


def iso_nanos(text: str) -> int:
    """`event.timestamp` (ISO 8601, e.g. 2026-12-03T10:15:02.123Z) as Unix ns; a
    ValueError saying why it is not one (not ISO 8601 with a zone, or out of range)."""
    from datetime import datetime
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("expected an ISO 8601 time with a zone") from None
    if dt.tzinfo is None:
        raise ValueError("expected an ISO 8601 time with a zone")
    ns = round(dt.timestamp() * 1e9)
    if not 0 <= ns < MAX_NANOS:
        raise ValueError(out_of_range(ns))
    return ns


def out_of_range(ns: int) -> str:
    """Why a time in Unix ns is refused: OTLP's times are unsigned 64-bit nanoseconds
    read as signed (2^63 ns is in the year 2262), from 1970."""
    return ("before 1970 (Unix time 0; OTLP times count from it)" if ns < 0 else
            "past the year 2262 (2^63 ns, the last time OTLP's nanoseconds hold)")
