"""YAML → validated `Scenario`, with CLI overrides and errors that say where.

Precedence: model defaults < scenario file < `--set key.path=value` overrides (and the
dedicated flags such as `--sessions`, which are sugar for `--set`). A validation
error names the file, the line of the offending key and its dotted path.

The `compaction` section may carry parameters for several policy kinds side by side
(e.g. `high_water_tokens` for block *and* `budget_tokens` for prune); only those of
the selected `kind` are used, so `--set compaction.kind=prune` switches policy
without editing the file. Keys unknown to every kind are still errors.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from simulator.errors import ScenarioError
from simulator.scenario.model import (
    BlockCompaction,
    ClearToolResultsCompaction,
    NoCompaction,
    PruneCompaction,
    Scenario,
    StepRamp,
    SummarizeCompaction,
)
from simulator.util.bounded import MAX_INT_DIGITS
from simulator.util.jsontypes import JSONObject

# libyaml's C loader when available: imported replay scenarios can be megabytes.
_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader",
                                                                  yaml.SafeLoader)

_COMPACTION_MODELS: dict[str, type[BaseModel]] = {
    "none": NoCompaction, "prune": PruneCompaction, "block": BlockCompaction,
    "summarize": SummarizeCompaction, "clear_tool_results": ClearToolResultsCompaction,
}


MAX_FILE_BYTES = 256 * 2**20     # a scenario file (imported replays can be large)
MAX_DEPTH = 64                   # nesting of mappings and lists
# Nodes after alias expansion (billion-laughs guard) and in the file itself: counted
# from the parser's event stream before any tree is built, so a flow list too large is
# refused as its items are counted, not parsed for minutes. The bound is memory: a load
# holds about LOAD_BYTES_PER_NODE per node (the parser's tree, the plain data, the
# validated models; measured: a team day of 100,000 requests, 4.4 million nodes, peaks
# at 2.9 GB resident), so MAX_NODES keeps a load within LOAD_MEMORY_BYTES — about
# 140,000 requests of a team replay (~44 nodes each). 4 GiB, not more: the count is the
# parser's event stream at ~1 µs a node, so the bound is also how long a hostile flow
# list of millions of scalars takes to refuse (~6 CPU-s at 6.1 million nodes; 8 GiB
# took 11 CPU-s). A transcript replay is few nodes of long text (1,000 turns: ~20,000).
LOAD_BYTES_PER_NODE = 700
LOAD_MEMORY_BYTES = 4 * 2**30
MAX_NODES = LOAD_MEMORY_BYTES // LOAD_BYTES_PER_NODE


def _check_events(text: str, file: str) -> None:
    """Refuse, while parsing, documents nested deeper than MAX_DEPTH or with more than
    MAX_NODES nodes (each alias counted as the size of what it names)."""
    total, depth = 0, 0
    open_anchors: list[tuple[str | None, int]] = []   # (anchor, total when it began)
    sizes: dict[str, int] = {}
    for ev in yaml.parse(text, Loader=_LOADER):
        if isinstance(ev, yaml.AliasEvent):
            total += sizes.get(ev.anchor or "", 1)
        elif isinstance(ev, yaml.ScalarEvent):
            total += 1
            if ev.anchor:
                sizes[ev.anchor] = 1
        elif isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            total += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=file,
                                    line=_line(ev))
            open_anchors.append((ev.anchor, total - 1))
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor:
                sizes[anchor] = total - start
        else:
            continue
        if total > MAX_NODES:
            raise ScenarioError(f"more than {MAX_NODES:,} YAML nodes (aliases expanded)",
                                file=file, line=_line(ev))


def check_data_limits(data: object, size_bytes: int, file: str) -> None:
    """The limits `load_scenario` applies to a file (size, nesting, nodes), checked on
    the plain data about to be written as that file — for a writer (the trace
    importers) that validated the data in memory and need not parse it back."""
    if size_bytes > MAX_FILE_BYTES:
        raise ScenarioError(f"{size_bytes / 2**20:,.0f} MiB of YAML; a scenario file holds "
                            f"at most {MAX_FILE_BYTES // 2**20} MiB", file=file)
    total = 0
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        v, depth = stack.pop()
        total += 1
        if isinstance(v, dict):
            total += len(v)                       # the keys
            items: Iterable[object] = v.values()
        elif isinstance(v, list | tuple):
            items = v
        else:
            continue
        if depth > MAX_DEPTH:
            raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=file)
        stack.extend((x, depth + 1) for x in items)
        if total > MAX_NODES:
            break
    if total > MAX_NODES:
        raise ScenarioError(f"more than {MAX_NODES:,} YAML nodes; a scenario file holds at "
                            f"most {MAX_NODES:,} (about {LOAD_MEMORY_BYTES // 2**30} GiB "
                            "to load; import fewer requests)", file=file)


def _line(ev: yaml.Event) -> int | None:
    return ev.start_mark.line + 1 if ev.start_mark is not None else None


_INT_TAG = "tag:yaml.org,2002:int"


def _check_tree(root: yaml.Node, file: str) -> None:
    """Refuse duplicate keys, non-scalar keys, nesting deeper than MAX_DEPTH and
    documents whose aliases expand past MAX_NODES nodes (each alias counted in full)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > MAX_DEPTH:
            raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=file,
                                line=node.start_mark.line + 1)
        n = 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                if not isinstance(k, yaml.ScalarNode):
                    raise ScenarioError("a mapping key must be a plain scalar", file=file,
                                        line=k.start_mark.line + 1)
                if k.value in seen and k.value != "<<":
                    raise ScenarioError(f"duplicate key {k.value!r}", file=file,
                                        line=k.start_mark.line + 1)
                seen.add(k.value)
                n += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            n += sum(size(v, depth + 1) for v in node.value)
        elif node.tag == _INT_TAG and len(node.value) > MAX_INT_DIGITS:
            # Python's int() refuses > 4,300 digits with a bare ValueError (a traceback)
            raise ScenarioError(f"an integer of {len(node.value):,} characters (more than "
                                f"{MAX_INT_DIGITS:,} digits)", file=file,
                                line=node.start_mark.line + 1)
        if n > MAX_NODES:
            raise ScenarioError(f"more than {MAX_NODES} nodes once aliases are expanded "
                                "(YAML alias bomb?)", file=file, line=node.start_mark.line + 1)
        sizes[id(node)] = n
        return n

    size(root, 0)


def read_text_file(path: str | Path, what: str = "scenario file") -> str:
    """A text file as UTF-8, at most MAX_FILE_BYTES; one ScenarioError otherwise."""
    p = Path(path)
    try:
        if not p.is_file():
            raise ScenarioError(f"{what} not found", file=str(path))
        if p.stat().st_size > MAX_FILE_BYTES:
            raise ScenarioError(f"{what} larger than {MAX_FILE_BYTES // 2**20} MiB",
                                file=str(path))
        data = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read {what} ({exc.strerror or type(exc).__name__})",
                            file=str(path)[:300]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ScenarioError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start})", file=str(path), line=line) from None


def _checked_load(text: str, file: str) -> object:
    """The document's node tree checked (`_check_tree`), then built into plain data
    by the same safe loader (C or pure Python): what `yaml.load` gives, composed once
    — `yaml.load` composes the same tree before it builds, so the peak memory is the
    same and a 40 MB team day is not parsed a third time."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_tree(root, file)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def safe_yaml(text: str, file: str) -> object:
    """YAML → plain data with the same guards as scenarios (duplicate keys, nesting,
    alias bombs); ScenarioError naming `file` and the line otherwise."""
    try:
        _check_events(text, file)
        return _checked_load(text, file)
    except RecursionError:
        raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=file) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"malformed YAML: {problem}", file=file,
                            line=mark.line + 1 if mark is not None else None) from None


def load_tools_file(path: Path) -> tuple[JSONObject, ...]:
    """A tools file (a YAML/JSON list of tool definitions, or `{tools: [...]}`)."""
    data = safe_yaml(read_text_file(path, "tools file"), str(path))
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list) or not all(isinstance(t, dict) and "name" in t for t in data):
        raise ScenarioError("tools file must hold a list of tool definitions with a 'name'",
                            file=str(path))
    return tuple(json.loads(json.dumps(data, default=str)))


def _line_map(text: str, file: str = "") -> dict[tuple[str, ...], int]:
    """Dotted key path → 1-based line number, from the YAML node tree (checked first
    by `_check_tree`)."""
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = (*path, str(k.value))
                lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, (*path, str(i)))

    _check_events(text, file)
    root = yaml.compose(text, Loader=_LOADER)
    if root is not None:
        _check_tree(root, file)
        walk(root, ())
    return lines


def _cut(text: str, limit: int = 120) -> str:
    """`text` quoted, cut to `limit` characters (a refusal stays one readable line)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text):,} characters)"


def parse_override(item: str) -> tuple[list[str], object]:
    """`a.b.c=value` → (["a","b","c"], parsed value); values are parsed as YAML."""
    if "=" not in item:
        raise ScenarioError(f"override {item!r} must look like key.path=value", file="--set")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ScenarioError(f"override {item!r} has an empty key", file="--set")
    try:
        node = yaml.compose(raw, Loader=_LOADER) if raw.strip() else None
        if node is not None:
            try:
                _check_tree(node, "--set")
            except ScenarioError as exc:    # name the key, not "line 1" of the value
                raise ScenarioError(str(exc).removeprefix("--set:1: "), file="--set",
                                    key_path=key.strip()[:120]) from None
        value = yaml.load(raw, Loader=_LOADER) if raw.strip() else ""
    except RecursionError:
        raise ScenarioError(f"override {key.strip()!r}: value nested too deeply",
                            file="--set") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"override {_cut(item)}: value is not valid YAML ({_cut(str(exc))})",
                            file="--set") from None
    return path, value


def apply_overrides(data: Mapping[str, object], overrides: list[str]) -> dict[str, object]:
    """Apply `--set` items; a numeric path part indexes a list
    (`turn_templates.0.tool.latency_s=0`)."""
    out: dict[str, object] = json.loads(json.dumps(data, default=str))  # a deep copy
    for item in overrides:
        path, value = parse_override(item)
        node: object = out
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            where = ".".join(path[:depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(f"no list item {part!r} (the list has {len(node)})",
                                        file="--set", key_path=where)
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ScenarioError(f"cannot set {'.'.join(path)}: {'.'.join(path[:depth])} is "
                                    "not a mapping or list", file="--set", key_path=where)
    return out


def _select_compaction(data: dict[str, object]) -> dict[str, object]:
    comp = data.get("compaction")
    if not isinstance(comp, dict):
        return data
    kind = comp.get("kind", "none")
    model = _COMPACTION_MODELS.get(kind)
    if model is None:
        return data  # let validation report the bad kind with its location
    all_keys = {k for m in _COMPACTION_MODELS.values() for k in m.model_fields}
    unknown = [k for k in comp if k not in all_keys]
    if unknown:
        return data  # validation will name the unknown key
    selected = {k: v for k, v in comp.items() if k in model.model_fields}
    if kind == "prune" and "budget_tokens" not in selected and "high_water_tokens" in comp:
        selected["budget_tokens"] = comp["high_water_tokens"]
    return {**data, "compaction": selected}


def _check_compaction_keys(data: Mapping[str, object], overrides: list[str], path: str,
                           lines: Callable[[], dict[tuple[str, ...], int]]) -> None:
    """A compaction key no policy knows (`--set compaction.knd=prune`) is named as such,
    with the closest known key, rather than surfacing as some other kind's parameter."""
    comp = data.get("compaction")
    if not isinstance(comp, dict):
        return
    known = sorted({k for m in _COMPACTION_MODELS.values() for k in m.model_fields})
    for key in comp:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"; did you mean compaction.{close[0]}?" if close else \
            f"; known keys: {', '.join(known)}"
        where = f"compaction.{key}"
        from_set = any(o.split("=", 1)[0].strip() == where for o in overrides)
        raise ScenarioError(f"unknown key{hint}", file="--set" if from_set else path,
                            line=None if from_set else lines().get(("compaction", str(key))),
                            key_path=where)


# pydantic's name for a union branch that failed: `int`, `constrained-int`,
# `literal['dense']`, `function-after[...]` — a type, never a scenario key
_UNION_BRANCH = re.compile(r"^(constrained-|literal\[|function-|int$|float$|str$|bool$|none$)")


_NAMED_KEY = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)+): ")


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    # Drop pydantic's union-tag segments (e.g. 'block', 'constant') from the path.
    clean = [p for p in loc if p not in _COMPACTION_MODELS and p not in
             ("constant", "uniform", "normal", "lognormal") and not _UNION_BRANCH.match(p)]
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    return ".".join(clean), msg


def scenario_hash(data: Mapping[str, object]) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class ScenarioSource:
    """A scenario file read and parsed once: its plain data before any override. A
    search reads its scenario once and every point resolves its own overrides on this
    value (`resolve_scenario`), instead of parsing the file again — a team day of
    100,000 requests is 40 MB of YAML. Plain values only (it travels with a point to a
    worker process or a Ray task)."""

    path: str
    data: Mapping[str, object]
    text: str | None = None        # the file's text, for error lines (None: re-read)

    def lines(self) -> dict[tuple[str, ...], int]:
        """Dotted key path → line in the file; computed on an error only."""
        text = self.text if self.text is not None else read_text_file(self.path)
        return _line_map(text, self.path)


def read_scenario(path: str | Path) -> ScenarioSource:
    """The file's text parsed to plain data, refusing what `load_scenario` refuses
    (size, duplicate keys, alias bombs, nesting, not a mapping)."""
    p = Path(path)
    text = read_text_file(path)
    try:
        _check_events(text, str(path))     # refuses duplicate keys and alias bombs
        data = _checked_load(text, str(path))
    except RecursionError:
        raise ScenarioError(f"nested more than {MAX_DEPTH} levels deep", file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if ctx and ctx_mark is not None:
            problem = f"{problem} ({ctx} at line {ctx_mark.line + 1})"
        raise ScenarioError(f"malformed YAML: {problem}", file=str(path), line=line) from None
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", file=str(path), line=1)
    data.setdefault("name", p.stem)
    return ScenarioSource(str(path), data, text)


def load_scenario(path: str | Path, overrides: list[str] | None = None
                  ) -> tuple[Scenario, dict[str, object]]:
    """Load, override and validate a scenario. Returns (scenario, resolved plain data)."""
    return resolve_scenario(read_scenario(path), overrides)


def resolve_scenario(src: ScenarioSource, overrides: Sequence[str] | None = None
                     ) -> tuple[Scenario, dict[str, object]]:
    """A read scenario with `overrides` applied, validated: (scenario, resolved plain
    data), exactly as `load_scenario` of its file gives (the source is not changed)."""
    path, over = src.path, list(overrides or [])
    overridden_data = apply_overrides(src.data, over)
    _check_compaction_keys(overridden_data, over, path, src.lines)
    resolved = _select_compaction(overridden_data)
    resolved["base_dir"] = str(Path(path).parent.resolve())
    try:
        scenario = Scenario.model_validate(resolved)
    except ValidationError as exc:
        key_path, msg = _first_error(exc)
        if not key_path and (named := _NAMED_KEY.match(msg)):
            # a check of the whole scenario that names its field ("sampling.top_k: …"):
            # blame that field (a --set of it, or its line), not the file's first line
            key_path, msg = named.group(1), msg[named.end():]
        parts = tuple(key_path.split(".")) if key_path else ()
        line = None
        keys = [o.split("=", 1)[0].strip() for o in over]
        overridden = any(k == key_path or k.startswith(key_path + ".") for k in keys)
        if not overridden:
            lines = src.lines()
            for n in range(len(parts), -1, -1):
                if parts[:n] in lines:
                    line = lines[parts[:n]]
                    break
        raise ScenarioError(msg, file="--set" if overridden else path,
                            line=None if overridden else line, key_path=key_path) from None
    _check_files(scenario, path, src.lines)
    return scenario, resolved


def with_step_ramp(resolved: Mapping[str, object], ramp: StepRamp
                   ) -> tuple[Scenario, dict[str, object]]:
    """The resolved scenario with `load.ramp` set to a typed stepped ramp (`run --ramp`,
    `size --ramp`): the plan as it was given (its unset defaults left out, as a `--set
    load.ramp=…` would have), checked with the rest of the scenario (one line if not)."""
    load = resolved.get("load")
    out = {**resolved, "load": {**(load if isinstance(load, dict) else {}),
                                "ramp": ramp.model_dump(mode="json", exclude_unset=True)}}
    try:
        return Scenario.model_validate(out), out
    except ValidationError as exc:
        key_path, msg = _first_error(exc)
        raise ScenarioError(msg, file="--ramp", key_path=key_path) from None


def _check_files(s: Scenario, path: str, lines: Callable[[], dict[tuple[str, ...], int]]
                 ) -> None:
    for section, spec in (("system", s.system), ("tools", s.tools)):
        if spec.file is not None and not (Path(s.base_dir) / spec.file).is_file():
            raise ScenarioError(f"referenced file not found: {spec.file}", file=path,
                                line=lines().get((section, "file")), key_path=f"{section}.file")
    # Read them now, so a file that is not UTF-8 or not a tools list is refused before
    # any results directory exists.
    if s.system.file is not None:
        read_text_file(Path(s.base_dir) / s.system.file, "system file")
    if s.tools.file is not None:
        load_tools_file(Path(s.base_dir) / s.tools.file)
