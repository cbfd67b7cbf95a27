"""Planted facts and recall probes of one session: which facts, where they go, when
they are asked about, and whether the context a probe was sent still holds them.

Pure except for `FactBook`, the small per-session ledger the agent keeps (which fact
was planted at which turn, which turns followed a compaction). Every draw comes from
a generator seeded by (seed, session, "facts"): the same scenario and seed plant the
same facts at the same turns whatever the server replies. Values are unique per
session and run by construction (they embed the session index), so no session can
answer from another session's text, and none is in the shared system prompt or tools.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from simulator.protocol.facts import Fact, FactKind, statement

__all__ = ["RETENTIONS", "Fact", "FactBook", "FactKind", "Retention", "carrier",
           "decision_text", "entered_turn", "make_fact", "plan_facts", "plant_in_file",
           "plant_in_prompt", "probe_reasons", "retention"]
from simulator.scenario.probes import MAX_FACTS, ProbesSpec
from simulator.session.compaction import SUMMARY_HEAD
from simulator.session.conversation import Message, TextBlock, ToolResultBlock, ToolUseBlock

Retention = Literal["verbatim", "summary", "dropped"]
RETENTIONS: tuple[Retention, ...] = ("verbatim", "summary", "dropped")

_TOPICS = (
    "ledger_sync", "billing_gateway", "search_indexer", "auth_proxy", "report_builder",
    "metrics_relay", "upload_worker", "cache_warmer", "invoice_mailer", "audit_log",
    "feature_flags", "session_store", "rate_limiter", "image_resizer", "geo_lookup",
    "payment_router", "event_bus", "schema_registry", "token_vault", "job_scheduler",
    "config_loader", "health_probe", "order_tracker", "price_engine", "user_directory",
    "webhook_sender", "backup_agent", "queue_monitor", "pdf_renderer", "email_parser",
    "stock_checker", "route_planner", "chat_gateway", "log_shipper", "quota_keeper",
    "trace_collector", "notify_hub", "export_service", "tenant_admin", "sync_daemon",
)
assert len(_TOPICS) >= MAX_FACTS
_CODE_WORDS = ("AMBER", "KESTREL", "COBALT", "JUNIPER", "SAFFRON", "TUNDRA", "OBSIDIAN",
               "MAGENTA", "PELICAN", "QUARTZ", "VERMILION", "ZEPHYR", "HALCYON", "MARLIN")
_STRATEGIES = ("exponential-backoff", "circuit-breaker", "token-bucket", "write-through",
               "read-repair", "blue-green", "canary-rollout", "dead-letter-queue")
_VERBS = ("apply", "flush", "merge", "resolve", "render", "validate", "schedule", "encode")


def _tag(rng: random.Random, session_index: int, fact_index: int) -> str:
    """Three random digits, the session index, the fact's letter(s): unique per
    (session, fact) because the random part has a fixed width."""
    letters = ""
    n = fact_index
    while True:
        letters = chr(ord("a") + n % 26) + letters
        n = n // 26 - 1
        if n < 0:
            break
    return f"{rng.randrange(100, 1000)}{session_index}{letters}"


def make_fact(kind: FactKind, turn: int, topic: str, rng: random.Random, session_id: str,
              session_index: int, fact_index: int) -> Fact:
    tag = _tag(rng, session_index, fact_index)
    if kind == "user_value":
        key, value = f"{topic.replace('_', '-')} release code word", \
            f"{rng.choice(_CODE_WORDS)}-{tag}"
    elif kind == "tool_value":
        si = session_index
        key = f"{topic}_address"
        value = (f"10.{(si >> 16) % 256}.{(si >> 8) % 256}.{si % 256}:"
                 f"{20000 + 1000 * fact_index + rng.randrange(1000)}")
    elif kind == "decision":
        key, value = f"{topic.replace('_', ' ')} failure strategy", \
            f"{rng.choice(_STRATEGIES)}-{tag}"
    else:
        key = f"{rng.choice(_VERBS)}_{topic}"
        value = f"src/{topic}/{topic}_{tag}.py"
    return Fact(f"{session_id}:f{fact_index}", kind, key, value, turn)


def plan_facts(spec: ProbesSpec, seed: int, session_id: str, session_index: int,
               turns: int) -> tuple[Fact, ...]:
    """The session's facts, in planned-turn order: `spec.facts` drawn (kinds in turn,
    turns uniform in the `plant_between` fraction of the session) and the chosen ones."""
    rng = random.Random(f"{seed}:{session_id}:facts")
    n = spec.facts + len(spec.plant)
    topics = rng.sample(_TOPICS, n)
    lo, hi = spec.plant_between
    last = max(0, turns - 1)
    planned: list[tuple[FactKind, int]] = [
        (spec.kinds[i % len(spec.kinds)], rng.randint(int(lo * last), int(hi * last)))
        for i in range(spec.facts)]
    planned += [(p.kind, p.turn) for p in spec.plant]
    facts = [make_fact(kind, turn, topics[i], rng, session_id, session_index, i)
             for i, (kind, turn) in enumerate(planned)]
    return tuple(sorted(facts, key=lambda f: (f.turn, f.fact_id)))


def entered_turn(kind: FactKind, planted_turn: int) -> int:
    """The first turn whose request holds the fact: a user prompt or tool result goes
    out with its own turn; a reply or an Edit call with the next one."""
    return planted_turn if kind in ("user_value", "tool_value") else planted_turn + 1


def _texts(m: Message) -> list[str]:
    out = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            out.append(b.text)
        elif isinstance(b, ToolResultBlock):
            out.append(b.content)
        elif isinstance(b, ToolUseBlock):
            out.append(b.input_json)
    return out


def _is_summary(m: Message) -> bool:
    return m.role == "user" and bool(m.blocks) and isinstance(m.blocks[0], TextBlock) \
        and m.blocks[0].text.startswith(SUMMARY_HEAD)


def carrier(fact: Fact) -> str:
    """What must be in a message for the fact to count as there verbatim: its
    statement (edited_path: the path, in the Edit call's input)."""
    if fact.kind == "edited_path":
        return f'"file_path":"{fact.value}"'
    return statement(fact.kind, fact.key, fact.value)


def retention(fact: Fact, messages: tuple[Message, ...]) -> Retention:
    """Where the fact is in the context sent: its statement verbatim outside a summary,
    its value inside a summary, or nowhere (dropped or cleared)."""
    want = carrier(fact)
    in_summary = False
    for m in messages:
        texts = _texts(m)
        if _is_summary(m):
            in_summary = in_summary or any(fact.value in t for t in texts)
        elif any(want in t for t in texts):
            return "verbatim"
    return "summary" if in_summary else "dropped"


def probe_reasons(spec: ProbesSpec, turn: int, last_turn: int, compacted: bool) -> str | None:
    """Why turn `turn`'s context is probed ("+"-joined), or None when it is not."""
    reasons = [r for r, on in (("compaction", compacted and spec.after_compaction),
                               ("turn", turn in spec.at_turns or (
                                   spec.every_turns is not None and turn > 0
                                   and turn % spec.every_turns == 0)),
                               ("end", turn == last_turn and spec.at_end)) if on]
    return "+".join(reasons) or None


@dataclass
class FactBook:
    """One session's facts: planned, planted (at which turn), and the turns that sent
    a compacted context (for the compactions a fact crossed)."""

    facts: tuple[Fact, ...]
    planted: dict[str, int] = field(default_factory=dict)
    compaction_turns: list[int] = field(default_factory=list)

    def due(self, kind: FactKind, turn: int, limit: int | None = None) -> list[Fact]:
        """Facts of `kind` planned at or before `turn` and not planted yet (at most
        `limit`): planted now (the caller can carry this kind at this turn)."""
        out = [f for f in self.facts if f.kind == kind and f.turn <= turn
               and f.fact_id not in self.planted][:limit]
        for f in out:
            self.planted[f.fact_id] = turn
        return out

    def askable(self, turn: int) -> list[tuple[Fact, int]]:
        """(fact, planted turn) for the facts turn `turn`'s request held when sent."""
        return [(f, t) for f in self.facts if (t := self.planted.get(f.fact_id)) is not None
                and entered_turn(f.kind, t) <= turn]

    def crossed(self, fact: Fact, planted_turn: int, turn: int) -> int:
        """Compactions between the fact entering the context and turn `turn`'s request."""
        first = entered_turn(fact.kind, planted_turn)
        return sum(1 for c in self.compaction_turns if first <= c <= turn)


def plant_in_prompt(text: str, facts: list[Fact]) -> str:
    """A user prompt with the facts' statements appended, one paragraph."""
    if not facts:
        return text
    return text + "\n\n" + " ".join(statement(f.kind, f.key, f.value) for f in facts)


def plant_in_file(body: str, facts: list[Fact], rng: random.Random) -> str:
    """A file's text (a Read result) with each fact as a settings line, inserted at a
    seeded line boundary."""
    if not facts:
        return body
    lines = body.split("\n")
    for f in facts:
        lines.insert(rng.randint(0, len(lines)), statement(f.kind, f.key, f.value))
    return "\n".join(lines)


def decision_text(facts: list[Fact]) -> str:
    """The assistant's words that state its decisions."""
    return " ".join(statement(f.kind, f.key, f.value) for f in facts)
