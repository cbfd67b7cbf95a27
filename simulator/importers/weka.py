"""Read Weka / SemiAnalysis cc-traces (callanjfox/agentic-coding-analysis
`docs/TRACE_FORMAT.md`): one JSON object per conversation with `block_size`,
`tool_tokens`, `system_tokens` and `requests[{t, type: n|s|subagent, model, in, out,
hash_ids, input_types, output_types, stop, api_time, ttft, think_time}]`; a
`subagent` entry carries its own `requests`, `tool_tokens`, `system_tokens` and its
start `t` on the parent's clock.

The file is streamed (`trace_stream`): per request only its sizes and two block
counts are kept (shared with the session's previous request, already seen in the
file: ids are numbered per conversation), never the hash ids themselves. A
malformed request is one `InputError` naming the file, the request and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sized
from pathlib import Path
from typing import Literal, TypeVar, overload

from simulator.errors import InputError
from simulator.importers.trace_build import (
    HashScope,
    TraceRequest,
    TraceSession,
    common_prefix,
    hit_tokens,
)
from simulator.importers.trace_stream import Items, StreamError, iter_object
from simulator.scenario.model import MAX_TOKENS
from simulator.util import bounded
from simulator.util.jsontypes import JSONObject

REQUEST_TYPES = frozenset({"n", "s", "subagent"})

# The bounds of a trace's fields (each refusal names the file, the request, the field):
MAX_REQUESTS = 10_000          # one import: a recorded call is ~90 YAML nodes of the
#                                scenario, whose loader stops at 1,000,000
MAX_TRACE_S = 366 * 86_400.0   # times and waits within a trace: a year
MAX_TEXT_CHARS = 256           # ids, model names, stop reasons
MAX_LIST_ITEMS = 1_000         # input_types / output_types
MAX_BLOCK_SIZE = 1 << 20       # tokens per hash id (as `import mooncake --block-size`)
MAX_ID = 1 << 64               # an integer hash id: |id| < 2^64
IDS_COVER = 4                  # hash ids cover at most 4× the prompt (+ one block): an
#                                export hashes the client's tokens, `in` is the server's


def _ids_ok(v: list[object]) -> bool:
    return all((type(x) is int and -MAX_ID < x < MAX_ID)
               or (type(x) is str and len(x) <= MAX_TEXT_CHARS) for x in v)


HashId = int | str             # a cc-traces / Mooncake hash id
T = TypeVar("T")


def read_prompt(v: object, key: str) -> int:
    """A prompt's tokens (≥ 1)."""
    return bounded.count(v, key, "tokens", 1, MAX_TOKENS)


def read_count(v: object, key: str) -> int:
    """Tokens (≥ 0)."""
    return bounded.count(v, key, "tokens", 0, MAX_TOKENS)


def read_block(v: object, key: str) -> int:
    """Tokens per hash id (≥ 1)."""
    return bounded.count(v, key, "tokens per block", 1, MAX_BLOCK_SIZE)


def read_seconds(v: object, key: str) -> float:
    """Seconds: finite, non-negative, within the trace's span."""
    return bounded.seconds(v, key, MAX_TRACE_S)


def read_millis(v: object, key: str) -> float:
    """Milliseconds (a Mooncake timestamp may be epoch milliseconds)."""
    return bounded.seconds(v, key, MAX_TRACE_MS_ABS, "ms")


def read_text(v: object, key: str) -> str:
    """A short string (an id, a model, a stop reason)."""
    return bounded.text(v, key, MAX_TEXT_CHARS)


def read_texts(v: object, key: str) -> list[str]:
    """A short list of short strings."""
    if not (isinstance(v, list) and len(v) <= MAX_LIST_ITEMS
            and all(isinstance(x, str) and len(x) <= MAX_TEXT_CHARS for x in v)):
        raise bounded.FieldError(f"field '{key}': expected a list of at most "
                                 f"{MAX_LIST_ITEMS:,} short strings, got {str(v)[:40]!r}")
    return [x for x in v if isinstance(x, str)]


def read_ids(v: object, key: str) -> list[HashId]:
    """Hash ids: integers below 2^64 or short strings."""
    if not isinstance(v, list) or not _ids_ok(v):
        raise bounded.FieldError(f"field '{key}': expected a list of hash ids (integers "
                                 f"below 2^64 or strings of at most {MAX_TEXT_CHARS} "
                                 f"characters), got {str(v)[:40]!r}")
    return v


@overload
def _field(d: Mapping[str, object], key: str, where: str, check: Callable[[object, str], T],
           required: Literal[True]) -> T: ...
@overload
def _field(d: Mapping[str, object], key: str, where: str, check: Callable[[object, str], T],
           required: bool = False) -> T | None: ...
def _field(d: Mapping[str, object], key: str, where: str, check: Callable[[object, str], T],
           required: bool = False) -> T | None:
    """`d[key]` as `check` reads it (one of the readers above, each in its unit); None
    when absent (InputError when `required`), InputError naming `where` when bad."""
    v = d.get(key)
    if v is None:
        if required:
            raise InputError(f"{where}: field '{key}': missing")
        return None
    try:
        return check(v, key)
    except bounded.FieldError as exc:
        raise InputError(f"{where}: {exc}") from None


# Mooncake timestamps may be epoch milliseconds: bounded to the year 2286, then the
# trace's span (first to last request) to MAX_TRACE_S.
MAX_TRACE_MS_ABS = 1e13


def check_ids_cover(ids: Sized, in_tokens: int, block_size: int, where: str,
                    key: str = "hash_ids") -> None:
    """A request's hash ids stand for blocks of its prompt: more than IDS_COVER× the
    prompt (plus one partial block) is not a trace of that prompt."""
    if len(ids) * block_size > IDS_COVER * in_tokens + block_size:
        raise InputError(f"{where}: field '{key}': {len(ids):,} ids of {block_size}-token "
                         f"blocks for a prompt of {in_tokens:,} tokens")


class _Reader:
    """Turns the stream of request objects into sessions (main first, sub-agents after)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scope = HashScope()
        self.sessions: list[TraceSession] = []
        self.prev_ids: dict[int, list[HashId]] = {}
        self.requests = 0

    def session(self, name: str, parent: int | None, start: float, tool: int, system: int,
                block_size: int) -> int:
        self.sessions.append(TraceSession(name, block_size, tool + system, tool, system,
                                          parent=parent, start_s=start, source=str(self.path)))
        return len(self.sessions) - 1

    def request(self, si: int, d: object, where: str) -> None:
        if not isinstance(d, dict):
            raise InputError(f"{where}: expected an object, got {str(d)[:40]!r}")
        kind = d.get("type", "s")
        if kind not in REQUEST_TYPES:
            raise InputError(f"{where}: field 'type': expected one of n, s, subagent, "
                             f"got {str(kind)[:20]!r}")
        if kind == "subagent":
            self.subagent(si, d, where)
            return
        self.requests += 1
        if self.requests > MAX_REQUESTS:
            raise InputError(f"{where}: more than {MAX_REQUESTS:,} requests; an import "
                             f"holds at most {MAX_REQUESTS:,} (split the trace)")
        ids = _field(d, "hash_ids", where, read_ids, required=True)
        prev = self.prev_ids.get(si)
        s = self.sessions[si]
        t = _field(d, "t", where, read_seconds)
        in_tokens = _field(d, "in", where, read_prompt, required=True)
        check_ids_cover(ids, in_tokens, s.block_size, where)
        s.requests.append(TraceRequest(
            t=float(t if t is not None else (s.requests[-1].t if s.requests else 0.0)),
            in_tokens=in_tokens,
            out_tokens=_field(d, "out", where, read_count, required=True),
            blocks=len(ids), shared_prev_blocks=common_prefix(ids, prev) if prev else 0,
            implied_hit_tokens=self.scope.observe(ids),       # blocks for now (× size later)
            model=_field(d, "model", where, read_text), stop=_field(d, "stop", where, read_text),
            api_time=_field(d, "api_time", where, read_seconds),
            ttft=_field(d, "ttft", where, read_seconds),
            think_time=_field(d, "think_time", where, read_seconds),
            input_types=tuple(_field(d, "input_types", where, read_texts) or ())))
        if s.model is None:
            s.model = s.requests[-1].model
        self.prev_ids[si] = ids

    def subagent(self, parent: int, d: dict[str, object], where: str) -> None:
        reqs = d.get("requests")
        if not isinstance(reqs, list):
            raise InputError(f"{where}: field 'requests': expected a list of requests")
        start = _field(d, "t", where, read_seconds, required=True)
        p = self.sessions[parent]
        agent = _field(d, "agent_id", where, read_text) if isinstance(d.get("agent_id"), str) \
            else d.get("agent_id")
        name = f"{p.name}.{str(agent)[:MAX_TEXT_CHARS] if agent else len(self.sessions)}"
        si = self.session(name, parent, float(start),
                          _field(d, "tool_tokens", where, read_count) or 0,
                          _field(d, "system_tokens", where, read_count) or 0, p.block_size)
        for j, r in enumerate(reqs):
            self.request(si, r, f"{where}.{j}")
        if not self.sessions[si].requests:
            raise InputError(f"{where}: field 'requests': a sub-agent with no requests")


def read_trace(path: Path) -> tuple[list[TraceSession], JSONObject]:
    """Sessions of one cc-traces file (the conversation, then its sub-agents) and its
    header fields (id, block_size, hash_id_scope, models)."""
    try:
        bounded.regular_file(path, "trace file")
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    r = _Reader(path)
    head: JSONObject = {}
    main = -1
    where = f"{path}"
    try:
        with path.open(encoding="utf-8-sig") as fh:
            idx = 0
            for key, value in iter_object(fh, "requests"):
                if isinstance(value, Items):    # the requests start: the main session
                    bs = _field(head, "block_size", f"{path}", read_block) or 64
                    name = _field(head, "id", f"{path}", read_text) \
                        if isinstance(head.get("id"), str) else head.get("id")
                    main = r.session(str(name or path.stem)[:MAX_TEXT_CHARS], None, 0.0,
                                     _field(head, "tool_tokens", f"{path}", read_count) or 0,
                                     _field(head, "system_tokens", f"{path}", read_count) or 0,
                                     bs)
                    where = f"{path}: request {idx}"
                    continue
                if key != "requests":
                    head[key] = value
                    continue
                r.request(main, value, where)
                idx += 1
                where = f"{path}: request {idx}"
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except StreamError as exc:
        if main >= 0 and where != f"{path}":
            raise InputError(f"{where}: not a cc-traces request ({exc})") from None
        raise InputError(f"{path}: not a cc-traces JSON object ({exc})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a cc-traces file") from None
    if main < 0:
        raise InputError(f"{path}: field 'requests': missing (not a cc-traces file)")
    if not r.sessions[main].requests:
        raise InputError(f"{path}: field 'requests': no requests")
    for s in r.sessions:
        for q in s.requests:
            q.implied_hit_tokens = hit_tokens(q.implied_hit_tokens, q.blocks, q.in_tokens,
                                              s.block_size)
        if s.prefix_tokens >= s.requests[0].in_tokens:   # the prefix must fit its first call
            s.prefix_tokens = max(0, s.requests[0].in_tokens - 2 * s.block_size)
    return r.sessions, head


def trace_files(paths: list[Path]) -> Iterator[Path]:
    """The files to read: given files, and each folder's *.json (sorted). A given path
    that is not a regular file (a FIFO, a device) is refused here, before any read."""
    for p in paths:
        if p.is_dir():
            yield from sorted(q for q in p.glob("*.json") if q.is_file())
        elif p.exists():
            try:
                bounded.regular_file(p, "trace file")
            except ValueError as exc:
                raise InputError(f"{p}: {exc}") from None
            yield p
        else:
            raise InputError(f"{p}: no such file or folder")
