"""`size --node 8xh100 --team M`: the layout of one node for a team's sessions.

The node's GPUs are cut into replicas of TP GPUs each: 8 × TP1, 4 × TP2, 2 × TP4,
1 × TP8 (the degrees that divide the node, pass vLLM's head checks and leave KV on each
GPU; the others are listed with the refusal's line). For each layout the one-replica
search runs (`card_size.SizeProfile` with `twin.tp=N`, each in `tp-N/`): the most
sessions one replica holds under every SLO at steady state. The searches run side by
side (`Together`: with `--parallel K` each batch holds every unfinished layout's next
probes, so the layouts run at once, not one after another, and each search still sees
exactly its own results: its answer is the one it gives alone; one point at a time, they
run in turn, each layout's runs together, which share the process's tokenizer cache).
A repeat with another seed only checks each answer and walks down if it fails
(`SizeProfile.repeat_up=False`): the headline, the least over the seeds, is what it
was, at a run where the gallop up took four or more. The node then holds
replicas × that, at the node's price; a team of M needs ceil(M / per replica) replicas.
That is the division `size --team` makes for one card, with the replicas behind a
session-affine router: each session's prefix cache lives on one replica, so more,
narrower replicas hold more independent caches and less KV each, fewer, wider ones
faster steps and more KV per replica — which wins is the search's answer, not assumed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Generic, TypeVar

from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import Slo
from simulator.errors import InputError
from simulator.sweep.card_size import SizeProfile
from simulator.sweep.pipeline import Profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import Outer, PointBase
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import load_hardware

JsonRow = dict[str, object]
V = TypeVar("V")
A = TypeVar("A")
_NODE_RE = re.compile(r"^\s*([1-9][0-9]{0,2})\s*[x×*]\s*([A-Za-z0-9_.\-]+)\s*$")
MAX_NODE_GPUS = 64


@dataclass(frozen=True, slots=True)
class Node:
    gpus: int
    card: str

    def __str__(self) -> str:
        return f"{self.gpus}x{self.card}"


def parse_node(text: str) -> Node:
    """`8xh100` (or `8×h100`) → Node(8, "h100"); one line for anything else."""
    m = _NODE_RE.match(text)
    if not m or int(m.group(1)) > MAX_NODE_GPUS:
        raise InputError(f"--node {text!r}: give GPUS x CARD, e.g. 8xh100 (1..{MAX_NODE_GPUS} "
                         "GPUs of one card profile)")
    node = Node(int(m.group(1)), m.group(2))
    load_hardware(node.card)                # an unknown card is one line now
    return node


def candidate_tps(gpus: int) -> list[int]:
    """TP degrees that cut the node into whole replicas: its divisors, powers of 2."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= gpus and gpus % t == 0]


@dataclass(frozen=True, slots=True)
class Layouts:
    """The TP degrees a node can run a model at, and the others with vLLM's refusal."""

    fitting: tuple[int, ...]
    refused: tuple[tuple[int, str], ...]
    kv_tokens: tuple[tuple[int, int], ...]      # KV capacity per replica, by TP


def layouts(node: Node, model: str, engine: dict[str, object], ep: bool) -> Layouts:
    """Which of `candidate_tps` the twin builds (`engine`: the scenario's engine
    overrides); none fitting is one line naming each refusal."""
    fitting: list[int] = []
    refused: list[tuple[int, str]] = []
    kv: list[tuple[int, int]] = []
    for tp in candidate_tps(node.gpus):
        over = {**engine, "tensor_parallel_size": tp, "enable_expert_parallel": ep and tp > 1}
        try:
            pm = build_perf_model(node.card, model, overrides=over)
        except InputError as exc:
            refused.append((tp, str(exc)))
            continue
        fitting.append(tp)
        kv.append((tp, pm.kv_capacity_tokens()))
    if not fitting:
        why = "; ".join(f"TP{t}: {r}" for t, r in refused)
        raise InputError(f"--node {node}: {model} fits no layout of the node ({why})")
    return Layouts(tuple(fitting), tuple(refused), tuple(kv))


def tp_dim(node: Node, tps: Sequence[int], ep: bool) -> Outer[int]:
    """The layouts as an outer dimension: `tp-N/`, `twin.tp=N` (and EP past TP 1)."""
    return Outer("tp", tuple(tps), lambda t: f"tp-{t}",
                 lambda t: (f"twin.tp={t}", f"twin.ep={'true' if ep and t > 1 else 'false'}"),
                 lambda t: f"{node.gpus // t} × TP{t}")


@dataclass
class Together(Generic[V, A]):
    """`search(base, value)` for every value of `dim` at once (`tiers.EachValue` runs
    them one after another): each batch is every unfinished search's next probes, the
    fan-out's width shared between them, and each search is sent exactly its own
    results, so each answers as it does alone (the searches share nothing)."""

    base: PointBase
    dim: Outer[V]
    search: Callable[[PointBase, V], Profile[A]]

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], list[tuple[V, A]]]:
        if width <= 1:      # one point at a time: in turn, each search's runs together
            return (yield from self._in_turn())     # (they share the tokenizer's cache)
        each = max(1, width // max(1, len(self.dim.values)))
        plans = {v: self.search(self.base.under(self.dim.sub(v), self.dim.overrides(v)),
                                v).plan(each) for v in self.dim.values}
        answers: dict[V, A] = {}
        pending: dict[V, list[Point]] = {}

        def advance(v: V, results: list[PointResult] | None) -> None:
            try:
                pending[v] = next(plans[v]) if results is None else plans[v].send(results)
            except StopIteration as done:
                answers[v] = done.value
                pending.pop(v, None)

        for v in self.dim.values:
            advance(v, None)
        while pending:
            order = list(pending)
            results = yield [p for v in order for p in pending[v]]
            at = 0
            for v in order:     # a serial fan-out stops at a failed point: fewer results
                k = len(pending[v])
                advance(v, list(results[at:at + k]))
                at += k
        return [(v, answers[v]) for v in self.dim.values]


    def _in_turn(self) -> Generator[list[Point], list[PointResult], list[tuple[V, A]]]:
        answers: list[tuple[V, A]] = []
        for v in self.dim.values:
            sub = self.base.under(self.dim.sub(v), self.dim.overrides(v))
            answers.append((v, (yield from self.search(sub, v).plan(1))))
        return answers


def node_profile(base: PointBase, node: Node, fits: Layouts, ep: bool, slos: tuple[Slo, ...],
                 max_sessions: int, repeats: int, team: int | None
                 ) -> Together[int, SizingResult]:
    """Every fitting layout's replica search, side by side (see the module)."""
    def search(b: PointBase, _tp: int) -> SizeProfile:
        found = SizeProfile.of(b, slos, max_sessions, repeats, team)
        found.repeat_up, found.trend = False, True
        return found
    return Together(base, tp_dim(node, fits.fitting, ep), search)


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """One layout of the node: its replicas, what one holds, the node's total, the cost."""

    tp: int
    ep: bool
    replicas: int
    sessions_per_replica: int
    sessions_per_replica_range: tuple[int, int]
    node_sessions: int
    usd_per_hour: float
    usd_per_session_hour: float | None
    kv_capacity_tokens_per_replica: int | None
    binding: str | None
    binding_kind: str | None
    team_replicas: int | None          # replicas a team of M needs (None: no team / none hold)
    team_nodes: int | None
    team_fits_node: bool
    confirmed: bool

    def to_dict(self) -> JsonRow:
        d = asdict(self)
        d["sessions_per_replica_range"] = list(self.sessions_per_replica_range)
        return d


@dataclass
class NodeLayoutTable:
    """One replica search per layout of `node` (see the module)."""

    node: Node
    model: str
    usd_per_gpu_hour: float
    team: int | None
    ep: bool
    layouts: Layouts
    answers: list[tuple[int, SizingResult]] = field(default_factory=list)

    def rows(self) -> list[LayoutRow]:
        kv = dict(self.layouts.kv_tokens)
        price = self.usd_per_gpu_hour * self.node.gpus
        out: list[LayoutRow] = []
        for tp, r in self.answers:
            replicas = self.node.gpus // tp
            held = replicas * r.sessions
            need = math.ceil(self.team / r.sessions) if self.team and r.sessions else None
            out.append(LayoutRow(
                tp, self.ep and tp > 1, replicas, r.sessions, r.sessions_range, held, price,
                price / held if held else None, kv.get(tp), r.binding, r.binding_kind, need,
                math.ceil(need / replicas) if need else None,
                need is not None and need <= replicas, r.confirmed))
        return out

    def best(self) -> LayoutRow | None:
        """The layout holding the most sessions on the node (ties: the narrower TP,
        more replicas to fail over to); None when no layout holds one."""
        rows = [r for r in self.rows() if r.node_sessions > 0]
        return max(rows, key=lambda r: (r.node_sessions, -r.tp)) if rows else None

    def to_dict(self) -> dict[str, object]:
        best = self.best()
        return {"node": str(self.node), "gpus": self.node.gpus, "card": self.node.card,
                "model": self.model, "team_sessions": self.team, "ep": self.ep,
                "usd_per_gpu_hour": self.usd_per_gpu_hour,
                "rows": [r.to_dict() for r in self.rows()],
                "best": best.to_dict() if best else None,
                "refused": [{"tp": t, "why": w} for t, w in self.layouts.refused],
                "searches": {f"tp-{tp}": r.to_dict() for tp, r in self.answers}}


def format_node_layout(table: NodeLayoutTable) -> str:
    """The layouts side by side, the answer, and the layouts refused."""
    head = (f"node {table.node} × {table.model}"
            f"{' (EP)' if table.ep else ''}: layouts, each replica searched under the SLOs")
    cols = ("layout", "KV tokens/replica", "sessions/replica", "node sessions", "$/h",
            "$/session·h", "binding", "team needs")
    widths = (9, 17, 16, 13, 7, 11, 28, 22)
    lines = [head, "  ".join(f"{c:>{w}}" for c, w in zip(cols, widths, strict=True))]
    for r in table.rows():
        lo, hi = r.sessions_per_replica_range
        per = f"{r.sessions_per_replica}" + (f" ({lo}–{hi})" if lo != hi else "")
        team = "" if table.team is None else (
            "n/a" if r.team_replicas is None else
            f"{r.team_replicas} replicas, {r.team_nodes} node(s)")
        cost = r.usd_per_session_hour
        kvt = r.kv_capacity_tokens_per_replica
        cells = (f"{r.replicas} × TP{r.tp}", f"{kvt:,}" if kvt is not None else "?", per,
                 str(r.node_sessions), f"{r.usd_per_hour:.2f}",
                 f"{cost:.3f}" if cost is not None else "n/a", (r.binding or "")[:28], team)
        lines.append("  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
    best = table.best()
    if best is None:
        lines.append("answer: no layout holds one session under the SLOs")
    else:
        fit = ""
        if table.team is not None:
            fit = (f"; the team of {table.team} fits one node" if best.team_fits_node else
                   f"; the team of {table.team} needs {best.team_nodes} such nodes")
        lines.append(f"answer: {best.replicas} × TP{best.tp} holds {best.node_sessions} "
                     f"sessions on the node at {best.usd_per_hour:.2f} $/h{fit}")
    for tp, why in table.layouts.refused:
        lines.append(f"TP{tp} refused: {why}")
    return "\n".join(lines)
