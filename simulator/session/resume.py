"""Resume an interrupted run: what each session already did, read back from its journals.

The agent draws every random choice from generators seeded by (seed, session, turn), so
a session's history is a pure function of the scenario and the server's replies. The
recorder's `history.jsonl` keeps each successful reply (content blocks in `live` mode,
only token counts in `scripted` mode, whose text is regenerated) and each session's
failure; replaying those rebuilds every session's conversation exactly where it stopped.
`turns.jsonl` gives the attempts already made, so numbering continues without duplicates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simulator.endpoints.base import LLMResponse, Timing, Usage
from simulator.errors import InputError
from simulator.records.manifest import Manifest, read_manifest
from simulator.session.conversation import Block, TextBlock, ToolUseBlock
from simulator.util.numbers import to_float, to_int

ReplayKey = tuple[int, str]          # (turn_index, request_kind)


@dataclass(frozen=True, slots=True)
class StoredReply:
    """What the agent needs from a reply to rebuild history (no timings: not re-measured)."""

    content: tuple[Block, ...]
    output_tokens: int | None
    output_tokens_est: int
    forced_compactions: int = 0      # forced compactions (context overflow) before success
    forced_targets: tuple[int, ...] = ()  # their targets (est. tokens); empty in old journals

    def response(self) -> LLMResponse:
        return LLMResponse(self.content, None, Usage(output_tokens=self.output_tokens),
                           Timing(0.0), self.output_tokens_est)


def reply_row(session_id: str, turn: int, kind: str, forced: int, resp: LLMResponse,
              keep_content: bool, forced_targets: list[int] | None = None) -> dict[str, object]:
    """The history-journal row for one successful request."""
    blocks: list[list[str | int]] = []
    if keep_content:
        for b in resp.content:
            if isinstance(b, TextBlock):
                blocks.append(["text", b.text, b.tokens_est])
            elif isinstance(b, ToolUseBlock):
                blocks.append(["tool_use", b.id, b.name, b.input_json, b.tokens_est])
    return {"session": session_id, "turn": turn, "kind": kind, "forced": forced,
            "out": resp.usage.output_tokens, "out_est": resp.output_tokens_est,
            "content": blocks, **({"targets": forced_targets} if forced_targets else {})}


def _block(b: Sequence[object]) -> Block:
    if b[0] == "text":
        return TextBlock(str(b[1]), to_int(b[2]))
    return ToolUseBlock(str(b[1]), str(b[2]), str(b[3]), to_int(b[4]))


def reply_from_row(row: Mapping[str, object]) -> StoredReply:
    content, out, targets = row.get("content", []), row.get("out"), row.get("targets")
    return StoredReply(tuple(_block(b) for b in _list(content) if isinstance(b, list)),
                       out if isinstance(out, int) else None,
                       to_int(row.get("out_est") or 0), to_int(row.get("forced") or 0),
                       tuple(to_int(t) for t in _list(targets)))


def _list(v: object) -> list[object]:
    """A journaled list as read back ([] when missing)."""
    return v if isinstance(v, list) else []


@dataclass
class ResumeState:
    """Everything a resumed run needs to know about the part(s) before it."""

    replay: dict[str, dict[ReplayKey, StoredReply]] = field(default_factory=dict)
    prior_attempts: dict[tuple[str, int, str], int] = field(default_factory=dict)
    done_sessions: set[str] = field(default_factory=set)
    failed_sessions: list[str] = field(default_factory=list)
    mono_offset_s: float = 0.0       # where the earlier part's timeline ended (s)
    # session → (turn, kind) → (sent, answered) in simulated s: a replayed stream keeps
    # its clock on resume (`ReplayAgent`), its later calls due when they were
    answered: dict[str, dict[ReplayKey, tuple[float, float]]] = field(default_factory=dict)
    rows_before: int = 0
    ramp_steps: list[Mapping[str, object]] = field(default_factory=list)   # judged steps
    notes: list[str] = field(default_factory=list)   # what the resume changed, one line each


def resume_state(turn_rows: Sequence[Mapping[str, object]],
                 history_rows: Sequence[Mapping[str, object]], turns: int) -> ResumeState:
    """Pure: fold the journals into a `ResumeState` (`turns` = turns per session)."""
    st = ResumeState(rows_before=len(turn_rows))
    for r in turn_rows:
        key = (str(r["session_id"]), to_int(r["turn_index"]), str(r["request_kind"]))
        st.prior_attempts[key] = max(st.prior_attempts.get(key, 0), to_int(r["attempt"]))
        sent = to_float(r.get("started_mono_s") or 0.0)
        end = sent + to_float(r.get("e2e_s") or 0.0)
        st.mono_offset_s = max(st.mono_offset_s, end)
        if r.get("ok"):
            st.answered.setdefault(key[0], {})[(key[1], key[2])] = (sent, end)
    for h in history_rows:
        sid = str(h["session"])
        if "failed" in h:
            if sid not in st.failed_sessions:
                st.failed_sessions.append(sid)
            continue
        st.replay.setdefault(sid, {})[(to_int(h["turn"]), str(h["kind"]))] = reply_from_row(h)
        if h["kind"] == "turn" and to_int(h["turn"]) >= turns - 1:
            st.done_sessions.add(sid)
    return st


def read_manifest_for_resume(run_dir: Path) -> Manifest:
    """The manifest of a run that may be resumed (InputError naming why not)."""
    path = run_dir / "manifest.json"
    data = read_manifest(run_dir)
    if data.scenario_resolved is None:
        raise InputError(f"{path}: not an endurance run manifest")
    if data.status == "completed":
        raise InputError(f"{run_dir}: the run already completed; nothing to resume")
    if not (run_dir / "turns.jsonl").is_file():
        raise InputError(f"{run_dir / 'turns.jsonl'}: missing; cannot resume without the journal")
    return data


def check_own_rows(path: Path, rows: Sequence[Mapping[str, object]], manifest: Manifest) -> None:
    """InputError (one line) when a journal holds a row of another run: a turn row
    whose `run_id`, or a history row whose `run` / `scenario_hash`, is not the
    manifest's (a journal copied or appended from elsewhere would otherwise stand in
    for this run's first turns). Rows without the stamp (older journals) pass."""
    run_id, digest = manifest.run_id, manifest.scenario_hash
    for i, row in enumerate(rows, 1):
        theirs = row.get("run_id", row.get("run"))
        if theirs is not None and run_id is not None and theirs != run_id:
            raise InputError(f"{path}: row {i} belongs to run {str(theirs)[:80]!r}, not "
                             f"{run_id!r}; refusing to resume a journal with another "
                             "run's rows")
        other = row.get("scenario_hash")
        if other is not None and digest is not None and other != digest:
            raise InputError(f"{path}: row {i} was written for scenario {str(other)[:40]!r}, "
                             f"not this run's {digest!r}; refusing to resume it")
