"""The run's manifest as one typed value: `Manifest`, read by `read_manifest`, written
by `Manifest.to_json` (the recorder writes it, `run/manifest.py` builds it).

`manifest.json` is the first file of a results directory and every reader (analysis,
report, live view, resume, export) needs some of it. Each used to pick keys out of the
dict it loaded, each with its own fallbacks; here the file is checked and upgraded
once, and a reader gets typed fields (`m.simulated`, `m.endpoint.url`,
`m.scenario_resolved.load`). Keys this version does not know are kept in `extra` and
written back as they were, so a manifest round-trips.

Upgrades (older results directories, as `upgrade_point_row` does for sweep JSON):
`scenario` as an object `{name, hash}` (its name and hash), `overrides` as one string,
no `scenario_base_dir` (the scenario file's folder), an `http_twin` without
`simulated` (an HTTP twin is simulated), a shard's `sessions: [start, stop]` (its
`session_range`); a key missing takes its default. A field of
the wrong type is one InputError line naming the file and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from simulator.errors import InputError
from simulator.scenario.model import GoodputSpec, LoadShape
from simulator.scenario.replay import ReplaySpec
from simulator.util.bounded import json_file
from simulator.util.jsontypes import as_object

MANIFEST = "manifest.json"
# A manifest embeds its resolved scenario, and a scenario file holds up to 256 MiB of
# YAML (`scenario.load.MAX_FILE_BYTES`): a team replay's interval is tens of MB. Written
# compact past 1 MiB (`records.recorder`), it is at most about twice its YAML; past this
# it is not one we wrote.
MAX_MANIFEST = 1 << 30

JsonObject = Mapping[str, object]      # a JSON object written back as it was read
T = TypeVar("T")


@dataclass(frozen=True)
class ResolvedScenario:
    """The scenario as the run resolved it (`raw`, written back as it was; `--resume`
    rebuilds the scenario from it) and the parts readers use, typed. `raw` holds what
    the scenario file and overrides set, so `sessions` and `turns` are None when the
    file left them to their defaults."""

    raw: JsonObject = field(default_factory=dict)
    model: str | None = None
    sessions: int | None = None
    turns: int | None = None
    load: LoadShape = field(default_factory=LoadShape)
    goodput: GoodputSpec | None = None
    team: ReplaySpec | None = None       # a team replay's script (None when it does not load)


@dataclass(frozen=True)
class EndpointFacts:
    """What the endpoint said about itself (`raw`, written back as it was), the parts
    a reader shows typed: its kind and URL, the twin's hardware and model, the profile's
    hardware description, model name and quantization, a fleet's or P/D pair's shape."""

    raw: JsonObject = field(default_factory=dict)
    kind: str | None = None
    url: str | None = None
    hardware: str | None = None
    model: str | None = None
    hardware_description: str | None = None
    model_name: str | None = None
    quantization: str | None = None
    replicas: str | None = None
    router: str | None = None
    prefill: str | None = None
    decode: str | None = None
    # where the twin's terms come from (`efficiency_for`'s label; "estimate: …" when
    # some are borrowed from another card or kernel family)
    calibration_source: str | None = None


@dataclass(frozen=True)
class RunSettings:
    """The command's endpoint settings a `--resume` reuses (`run_spec`)."""

    endpoint_url: str | None = None
    twin: str | None = None
    spec: str | None = None
    client: str | None = None
    stop_grace_s: float | None = None


@dataclass(frozen=True)
class Manifest:
    """One run's manifest (see the module docstring). Every field has a default: a
    manifest that is still being written reads as far as it goes."""

    run_id: str | None = None
    label: str | None = None
    scenario: str | None = None               # the scenario's name
    scenario_file: str | None = None
    scenario_hash: str | None = None
    scenario_resolved: ResolvedScenario | None = None
    overrides: tuple[str, ...] = ()
    seed: int | None = None
    sessions: int | None = None
    turns: int | None = None
    compaction: str | None = None
    load: LoadShape | None = None              # the load shape, every default stated
    sampling: JsonObject | None = None
    endpoint: EndpointFacts = field(default_factory=EndpointFacts)
    simulated: bool = False
    price_per_hour: float | None = None
    contains_verbatim_content: bool = False
    versions: Mapping[str, str] = field(default_factory=dict)
    scenario_base_dir: str | None = None
    run_spec: RunSettings | None = None
    # the server's facts (`run.server.ServerInfo.stamp`)
    time_scale: float | None = None
    http_twin: JsonObject | None = None
    server_max_model_len: int | None = None
    # a sharded run; a shard's own manifest (under workers/): its index, sessions, pid
    workers: int | None = None
    executor: str | None = None
    clock_alignment: JsonObject | None = None
    worker: int | None = None
    session_range: tuple[int, int] | None = None
    pid: int | None = None
    # the recorder's and the finish's
    status: str | None = None
    status_reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    rows: int | None = None
    failed_sessions: tuple[str, ...] | None = None
    telemetry: tuple[JsonObject, ...] | None = None
    resumes: tuple[JsonObject, ...] = ()
    extra: JsonObject = field(default_factory=dict)   # keys this version does not know

    @property
    def was_resumed(self) -> bool:
        """Whether the run was continued with `--resume` (older files: `resumed_from`)."""
        return bool(self.resumes) or bool(self.extra.get("resumed_from"))

    @property
    def endurance_version(self) -> str | None:
        return self.versions.get("endurance")

    @property
    def http_twin_hardware(self) -> str | None:
        return _text((self.http_twin or {}).get("hardware"))

    @property
    def http_twin_model(self) -> str | None:
        return _text((self.http_twin or {}).get("model"))

    def to_json(self) -> dict[str, object]:
        """The file's JSON object: the fields a run writes when it opens, then those
        written later (left out until they are set), then the unknown keys as read."""
        rs, ep = self.scenario_resolved, self.endpoint
        out: dict[str, object] = {
            "run_id": self.run_id, "label": self.label, "scenario": self.scenario,
            "scenario_file": self.scenario_file, "scenario_hash": self.scenario_hash,
            "scenario_resolved": None if rs is None else dict(rs.raw),
            "overrides": list(self.overrides), "seed": self.seed, "sessions": self.sessions,
            "turns": self.turns, "compaction": self.compaction,
            "load": None if self.load is None else self.load.model_dump(),
            "sampling": self.sampling, "endpoint": dict(ep.raw), "simulated": self.simulated,
            "price_per_hour": self.price_per_hour,
            "contains_verbatim_content": self.contains_verbatim_content,
            "versions": dict(self.versions), "scenario_base_dir": self.scenario_base_dir,
            "run_spec": None if self.run_spec is None else dataclasses.asdict(self.run_spec)}
        later: dict[str, object] = {
            "time_scale": self.time_scale, "http_twin": self.http_twin,
            "server_max_model_len": self.server_max_model_len, "workers": self.workers,
            "executor": self.executor, "worker": self.worker,
            "session_range": None if self.session_range is None else list(self.session_range),
            "pid": self.pid, "status": self.status, "started_at": self.started_at,
            "resumes": [dict(r) for r in self.resumes] if self.resumes else None,
            "clock_alignment": self.clock_alignment,
            "telemetry": None if self.telemetry is None else [dict(t) for t in self.telemetry],
            "status_reason": self.status_reason,
            "failed_sessions": None if self.failed_sessions is None
            else list(self.failed_sessions),
            "ended_at": self.ended_at, "rows": self.rows}
        out.update((k, v) for k, v in later.items() if v is not None)
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest, upgraded and typed (InputError, one line, when it is missing,
    no regular file, not JSON, not an object or a field of the wrong type)."""
    path = run_dir / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise InputError(f"{path}: missing; is {run_dir} a run directory?")
    data = json_file(path, what="manifest", max_bytes=MAX_MANIFEST)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return parse_manifest(data, str(path))


def upgrade(data: Mapping[str, object]) -> dict[str, object]:
    """An older manifest's JSON in today's shape (the rules in the module docstring)."""
    out = dict(data)
    scen = out.get("scenario")
    if isinstance(scen, Mapping):                   # {name, hash}
        out["scenario"] = scen.get("name")
        if scen.get("hash") is not None:
            out["scenario_hash"] = scen["hash"]
    if isinstance(out.get("overrides"), str):
        out["overrides"] = [out["overrides"]]
    if not out.get("scenario_base_dir") and isinstance(out.get("scenario_file"), str):
        out["scenario_base_dir"] = str(Path(str(out["scenario_file"])).parent)
    if isinstance(out.get("http_twin"), Mapping) and out["http_twin"]:
        out["simulated"] = True
    if isinstance(out.get("sessions"), list):       # a shard's [start, stop]
        out["session_range"] = out.pop("sessions")
    return out


_KNOWN = frozenset(f.name for f in dataclasses.fields(Manifest)) - {"extra"}


def parse_manifest(data: Mapping[str, object], where: str) -> Manifest:
    """`Manifest` of a manifest's JSON object, upgraded (`upgrade`); `where` names the
    file in the InputError a field of the wrong type raises."""
    d = _Fields(upgrade(data), where)
    resolved = d.obj("scenario_resolved")
    spec = d.obj("run_spec")
    return Manifest(
        run_id=d.text("run_id"), label=d.text("label"), scenario=d.text("scenario"),
        scenario_file=d.text("scenario_file"), scenario_hash=d.text("scenario_hash"),
        scenario_resolved=None if resolved is None else _resolved(resolved, where),
        overrides=d.texts("overrides") or (), seed=d.integer("seed"),
        sessions=d.integer("sessions"), turns=d.integer("turns"), compaction=d.text("compaction"),
        load=None if d.data.get("load") is None
        else _section(LoadShape, d.data.get("load"), f"{where}: load"),
        sampling=d.obj("sampling"),
        endpoint=_endpoint(d.obj("endpoint") or {}),
        simulated=d.flag("simulated"), price_per_hour=d.number("price_per_hour"),
        contains_verbatim_content=d.flag("contains_verbatim_content"),
        versions={k: str(v) for k, v in (d.obj("versions") or {}).items()},
        scenario_base_dir=d.text("scenario_base_dir"),
        run_spec=None if spec is None else _run_settings(spec, f"{where}: run_spec"),
        time_scale=d.number("time_scale"), http_twin=d.obj("http_twin"),
        server_max_model_len=d.integer("server_max_model_len"), workers=d.integer("workers"),
        executor=d.text("executor"), clock_alignment=d.obj("clock_alignment"),
        worker=d.integer("worker"), session_range=d.pair("session_range"),
        pid=d.integer("pid"),
        status=d.text("status"), status_reason=d.text("status_reason"),
        started_at=d.number("started_at"), ended_at=d.number("ended_at"), rows=d.integer("rows"),
        failed_sessions=d.texts("failed_sessions"), telemetry=d.objs("telemetry"),
        resumes=d.objs("resumes") or (),
        extra={k: v for k, v in data.items() if k not in _KNOWN})


class _Fields:
    """A JSON object's fields, each checked for its type (None when missing or null)."""

    def __init__(self, data: Mapping[str, object], where: str) -> None:
        self.data, self.where = data, where

    def _bad(self, key: str, what: str, v: object) -> InputError:
        return InputError(f"{self.where}: field {key!r}: expected {what}, got "
                          f"{type(v).__name__}")

    def _get(self, key: str, kind: type[T] | tuple[type, ...], what: str) -> T | None:
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) and kind in (int, float, (int, float)):
            raise self._bad(key, what, v)     # booleans are not numbers
        if not isinstance(v, kind):
            raise self._bad(key, what, v)
        return v  # type: ignore[return-value]

    def text(self, key: str) -> str | None:
        return self._get(key, str, "a string")

    def integer(self, key: str) -> int | None:
        return self._get(key, int, "an integer")

    def number(self, key: str) -> float | None:
        v: int | float | None = self._get(key, (int, float), "a number")
        return None if v is None else float(v)

    def flag(self, key: str) -> bool:
        return self._get(key, bool, "true or false") or False

    def obj(self, key: str) -> JsonObject | None:
        return self._get(key, dict, "an object")

    def texts(self, key: str) -> tuple[str, ...] | None:
        v = self._get(key, list, "a list")
        if v is not None and not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings", v)
        return None if v is None else tuple(v)

    def pair(self, key: str) -> tuple[int, int] | None:
        v = self._get(key, list, "a list")
        if v is None:
            return None
        if len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self._bad(key, "two integers", v)
        return (v[0], v[1])

    def objs(self, key: str) -> tuple[JsonObject, ...] | None:
        v = self._get(key, list, "a list")
        if v is None:
            return None
        return tuple(x for x in v if isinstance(x, dict))   # as readers kept them


def _text(v: object) -> str | None:
    """A description's value as shown (a number as its digits), None when absent."""
    return v if isinstance(v, str) else None if v is None or isinstance(v, dict | list) \
        else str(v)


def _endpoint(raw: JsonObject) -> EndpointFacts:
    """The typed parts of an endpoint's description (free-form: whatever an endpoint
    states; a part that is not what it should be is left out, as readers did)."""
    profile = as_object(raw.get("profile"))
    hw, model = as_object(profile.get("hardware")), as_object(profile.get("model"))
    return EndpointFacts(
        raw=raw, kind=_text(raw.get("kind")), url=_text(raw.get("url")),
        hardware=_text(raw.get("hardware")), model=_text(raw.get("model")),
        hardware_description=_text(hw.get("description")),
        model_name=_text(model.get("name")), quantization=_text(model.get("quantization")),
        replicas=_text(raw.get("replicas")), router=_text(raw.get("router")),
        prefill=_text(raw.get("prefill")), decode=_text(raw.get("decode")),
        calibration_source=_text(profile.get("calibration_source")))


def _run_settings(raw: JsonObject, where: str) -> RunSettings:
    d = _Fields(raw, where)
    return RunSettings(d.text("endpoint_url"), d.text("twin"), d.text("spec"), d.text("client"),
                       d.number("stop_grace_s"))


def _resolved(raw: JsonObject, where: str) -> ResolvedScenario:
    """The typed parts of the resolved scenario; its `load` and `goodput` sections as
    the scenario model reads them (keys a later version dropped are ignored)."""
    d = _Fields(raw, f"{where}: scenario_resolved")
    replay = raw.get("replay")
    team = None
    if isinstance(replay, dict) and replay.get("team"):
        try:
            team = ReplaySpec.model_validate(replay)
        except ValueError:
            team = None           # a script this version cannot read: no team section
    goodput = raw.get("goodput")
    return ResolvedScenario(
        raw=raw, model=d.text("model"), sessions=d.integer("sessions"), turns=d.integer("turns"),
        load=_section(LoadShape, raw.get("load"), f"{where}: scenario_resolved.load"),
        goodput=_section(GoodputSpec, goodput, f"{where}: scenario_resolved.goodput")
        if goodput else None, team=team)


M = TypeVar("M", LoadShape, GoodputSpec)


def _section(model: type[M], raw: object, where: str) -> M:
    if raw is None:
        return model()
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object, got {type(raw).__name__}")
    try:
        return model.model_validate({k: v for k, v in raw.items() if k in model.model_fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(x) for x in first["loc"])
        raise InputError(f"{where}: {at + ': ' if at else ''}{first['msg']}") from None
