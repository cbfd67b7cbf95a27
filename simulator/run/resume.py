"""Open an interrupted run directory for `endurance run --resume RUN_DIR`.

The scenario comes back from the manifest (`scenario_resolved`, so an edited or moved
scenario file cannot change the history being rebuilt), the endpoint from the manifest's
`run_spec` unless the command line names another, and the journals are reopened for
appending under the writer's lock. The manifest's `resumes` list records each resume.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from pydantic import ValidationError

from simulator.endpoints.base import Endpoint
from simulator.endpoints.http.preflight import preflight
from simulator.errors import InputError
from simulator.records.manifest import Manifest, RunSettings
from simulator.records.ownership import (
    WORKERS_DIR,
    drop_duplicated_rows,
    history_key,
    refuse_if_running,
    rows_to_rebuild,
    turn_key,
    without_row,
)
from simulator.records.recorder import (
    EVENTS_JOURNAL,
    HISTORY_JOURNAL,
    METRICS_JOURNAL,
    ROW_JOURNALS,
    TURNS_JOURNAL,
    Recorder,
    read_journal,
)
from simulator.records.rows import TurnRecord
from simulator.run.spec import RunSpec
from simulator.scenario.model import Scenario
from simulator.session.resume import (
    ResumeState,
    check_own_rows,
    read_manifest_for_resume,
    resume_state,
)
from simulator.twin.model.profiles import load_hardware, load_model, parse_twin
from simulator.util.jsontypes import JSONObject


def _scenario(run_dir: Path, m: Manifest) -> Scenario:
    assert m.scenario_resolved is not None      # read_manifest_for_resume refuses others
    resolved = dict(m.scenario_resolved.raw)
    resolved["base_dir"] = m.scenario_base_dir or "."
    try:
        return Scenario.model_validate(resolved)
    except ValidationError as exc:
        first = str(exc).splitlines()[1:3]
        raise InputError(f"{run_dir / 'manifest.json'}: scenario_resolved does not validate: "
                         f"{' '.join(x.strip() for x in first)}") from None


def open_resumed(spec: RunSpec, endpoint: Endpoint | None) -> tuple[Scenario, RunSpec, Recorder,
                                                                    ResumeState]:
    """(scenario, the spec completed from the manifest, a recorder appending to the run,
    what the earlier part did)."""
    assert spec.resume_dir is not None
    run_dir = Path(spec.resume_dir)
    m = read_manifest_for_resume(run_dir)
    refuse_if_running(run_dir)
    for path in _journals(run_dir):      # a corrupted journal refuses before anything changes
        check_own_rows(path, read_journal(path), m)
    if spec.overrides or spec.ramp is not None:
        raise InputError("--resume: scenario overrides (--set, --turns, --sessions, --seed, "
                         "--model) cannot change a run being resumed")
    s = _scenario(run_dir, m)
    rs = m.run_spec or RunSettings()
    if spec.twin is None and rs.twin is not None:
        _check_manifest_twin(run_dir, rs.twin)
    spec = dataclasses.replace(
        spec, scenario_path=m.scenario_file or "",
        endpoint_url=spec.endpoint_url or rs.endpoint_url,
        twin=spec.twin or rs.twin, spec=spec.spec or rs.spec,
        client=spec.client or rs.client, label=spec.label or m.label,
        stop_grace_s=spec.stop_grace_s if spec.stop_grace_s is not None
        else rs.stop_grace_s,
        price_per_hour=spec.price_per_hour if spec.price_per_hour is not None
        else m.price_per_hour)
    if spec.endpoint_url is not None and endpoint is None:
        preflight(spec.endpoint_url, s.endpoint.connect_timeout_s, s.timeouts)
    prior_status = m.status
    turns_path = run_dir / TURNS_JOURNAL      # before the recorder appends to it
    duplicates = drop_duplicated_rows(turns_path, read_journal(turns_path))
    recorder = Recorder(run_dir, m, resume=True)
    merged = merge_worker_journals(recorder, run_dir)
    rebuilt = rebuild_rows(recorder, run_dir)
    state = resume_state(read_journal(run_dir / TURNS_JOURNAL),
                         read_journal(run_dir / HISTORY_JOURNAL), s.turns)
    if duplicates:
        state.notes.append(f"note: {turns_path}: {duplicates} duplicated row(s) (the same "
                           "session, turn, kind and attempt) kept once; each turn counts once")
    if (run_dir / EVENTS_JOURNAL).exists():     # a ramp's judged steps: it continues after
        state.ramp_steps = [e for e in read_journal(run_dir / EVENTS_JOURNAL)
                            if e.get("event") == "ramp_step"]
    resumes = (*m.resumes, {
        "at": time.time(), "from_status": prior_status, "rows_before": state.rows_before,
        "sessions_done": len(state.done_sessions),
        "sessions_failed": len(state.failed_sessions), "worker_rows_merged": merged,
        "rows_rebuilt": rebuilt, "duplicated_rows_dropped": duplicates})
    recorder.update_manifest(dataclasses.replace(recorder.manifest, resumes=resumes))
    return s, spec, recorder, state


def _check_manifest_twin(run_dir: Path, twin: str) -> None:
    """The manifest's `run_spec.twin` names a twin, or one line naming the manifest and
    the field (read later, its refusal blamed `--twin`, an option never given)."""
    where = f"{run_dir / 'manifest.json'}: run_spec.twin"
    try:
        hw, model = parse_twin(twin, where)
        load_hardware(hw)
        load_model(model)
    except InputError as exc:
        msg = str(exc)
        raise InputError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def _turn_record(row: JSONObject, where: Path) -> TurnRecord:
    try:
        return TurnRecord.from_row(row)
    except (TypeError, ValueError):
        raise InputError(f"{where}: a history line carries a turn row that does not load; "
                         "refusing to resume") from None


def rebuild_rows(recorder: Recorder, run_dir: Path) -> int:
    """Write back the turn rows a kill took between a success's history line and its
    turn row (the history line carries it); the number written."""
    missing = rows_to_rebuild(read_journal(run_dir / TURNS_JOURNAL),
                              read_journal(run_dir / HISTORY_JOURNAL))
    for row in missing:
        _turn_record(row, run_dir / HISTORY_JOURNAL)
        recorder.write_row(row)
    return len(missing)


def _journals(run_dir: Path) -> list[Path]:
    return [d / n for d in (run_dir, *sorted((run_dir / WORKERS_DIR).glob("w*")))
            for n in ROW_JOURNALS]


def merge_worker_journals(recorder: Recorder, run_dir: Path) -> int:
    """A `--workers` run whose parent died before merging: append to the run's journals
    the rows its workers journaled that the run's lack (keyed, so a merge cut short is
    completed, never doubled). Returns the number of turn rows added."""
    shards = sorted((run_dir / WORKERS_DIR).glob("w*"))
    if not shards:
        return 0
    turns = {turn_key(r) for r in read_journal(run_dir / TURNS_JOURNAL)}
    hist = {history_key(r) for r in read_journal(run_dir / HISTORY_JOURNAL)}
    has_metrics = bool(read_journal(run_dir / METRICS_JOURNAL))
    added = 0
    for shard in shards:
        shard_hist = read_journal(shard / HISTORY_JOURNAL)
        shard_turns = read_journal(shard / TURNS_JOURNAL)
        for row in [*shard_turns, *rows_to_rebuild(shard_turns, shard_hist)]:
            if turn_key(row) not in turns:
                turns.add(turn_key(row))
                recorder.write(_turn_record(row, shard / TURNS_JOURNAL))
                added += 1
        for row in shard_hist:
            if history_key(row) not in hist:
                hist.add(history_key(row))
                recorder.write_history(without_row(row))
        if not has_metrics:
            for row in read_journal(shard / METRICS_JOURNAL):
                recorder.write_metrics(row)
    return added
