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
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from simulator.errors import ScenarioError
from simulator.scenario.model import (
    BlockCompaction,
    ClearToolResultsCompaction,
    NoCompaction,
    PruneCompaction,
    Scenario,
    SummarizeCompaction,
)

# libyaml's C loader when available: imported replay scenarios can be megabytes.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_COMPACTION_MODELS: dict[str, type[Any]] = {
    "none": NoCompaction, "prune": PruneCompaction, "block": BlockCompaction,
    "summarize": SummarizeCompaction, "clear_tool_results": ClearToolResultsCompaction,
}


def _line_map(text: str) -> dict[tuple[str, ...], int]:
    """Dotted key path → 1-based line number, from the YAML node tree."""
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

    root = yaml.compose(text, Loader=_LOADER)
    if root is not None:
        walk(root, ())
    return lines


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` → (["a","b","c"], parsed value); values are parsed as YAML."""
    if "=" not in item:
        raise ScenarioError(f"override {item!r} must look like key.path=value", file="--set")
    key, raw = item.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ScenarioError(f"override {item!r} has an empty key", file="--set")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ScenarioError(f"override {item!r}: value is not valid YAML ({exc})",
                            file="--set") from None
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `--set` items; a numeric path part indexes a list
    (`turn_templates.0.tool.latency_s=0`)."""
    out: dict[str, Any] = json.loads(json.dumps(data))  # deep copy of plain data
    for item in overrides:
        path, value = parse_override(item)
        node: Any = out
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


def _select_compaction(data: dict[str, Any]) -> dict[str, Any]:
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


def _check_compaction_keys(data: dict[str, Any], overrides: list[str], path: str,
                           lines: dict[tuple[str, ...], int]) -> None:
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
                            line=None if from_set else lines.get(("compaction", str(key))),
                            key_path=where)


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    # Drop pydantic's union-tag segments (e.g. 'block', 'constant') from the path.
    clean = [p for p in loc if p not in _COMPACTION_MODELS and p not in
             ("constant", "uniform", "normal", "lognormal")]
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    return ".".join(clean), msg


def scenario_hash(data: dict[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, dict[str, Any]]:
    """Load, override and validate a scenario. Returns (scenario, resolved plain data)."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError("scenario file not found", file=str(path))
    text = p.read_text(encoding="utf-8")
    try:
        data = yaml.load(text, Loader=_LOADER)  # a safe loader (C or pure Python)
        lines = _line_map(text)
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
    overridden_data = apply_overrides(data, overrides or [])
    _check_compaction_keys(overridden_data, overrides or [], str(path), lines)
    resolved = _select_compaction(overridden_data)
    resolved["base_dir"] = str(p.parent.resolve())
    try:
        scenario = Scenario.model_validate(resolved)
    except ValidationError as exc:
        key_path, msg = _first_error(exc)
        parts = tuple(key_path.split(".")) if key_path else ()
        line = None
        for n in range(len(parts), -1, -1):
            if parts[:n] in lines:
                line = lines[parts[:n]]
                break
        keys = [o.split("=", 1)[0].strip() for o in overrides or []]
        overridden = any(k == key_path or k.startswith(key_path + ".") for k in keys)
        raise ScenarioError(msg, file="--set" if overridden else str(path),
                            line=None if overridden else line, key_path=key_path) from None
    _check_files(scenario, str(path), lines)
    return scenario, resolved


def _check_files(s: Scenario, path: str, lines: dict[tuple[str, ...], int]) -> None:
    for section, spec in (("system", s.system), ("tools", s.tools)):
        if spec.file is not None and not (Path(s.base_dir) / spec.file).is_file():
            raise ScenarioError(f"referenced file not found: {spec.file}", file=path,
                                line=lines.get((section, "file")), key_path=f"{section}.file")
