"""A generator of realistic Claude Code transcripts for the importer tests.

It writes the documented format (split assistant lines sharing message.id with a
placeholder output count, compact boundaries, a sub-agent file, progress/snapshot/
unknown records, a malformed line, a tool error) and computes each call's usage from
a model of the real tokenizer (cl100k × TRUE_SCALE plus framing and a hidden prefix),
with the cache read = the previous prompt (or the prefix after a compaction).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from simulator.util import tokens

TRUE_SCALE = 1.12
PREFIX = 19_000    # = the scenario defaults (3,000 system + 16,000 tools)
SECRETS = ("sk-ant-api03-PLANTEDxSECRETxKEYx0042", "/home/alice/secretproj",
           "buildbox-7.corp.internal", "alice.smith@example.com", "AKIAPLANTEDAWSKEY42")
_WORDS = ("parser", "config", "retry", "handler", "cache", "window", "budget", "token")


def _code(rng: random.Random, n: int) -> list[str]:
    return [f"    {rng.choice(_WORDS)}_{i} = compute({rng.choice(_WORDS)}, {rng.randint(0, 999)})"
            for i in range(n)]


class _Writer:
    def __init__(self, session: str, sidechain: bool, t0: datetime) -> None:
        self.session, self.side, self.t = session, sidechain, t0
        self.recs: list[Any] = []
        self.parent: str | None = None
        self.n = 0
        self.hist: list[int] = []       # cl100k sizes of the blocks in context
        self.msgs = 0
        self.prev_prompt = 0
        self.tag = session          # uuid prefix (unique per writer)

    def add(self, rec: dict[str, Any], dt: float = 1.0, chain: bool = True) -> str:
        self.t += timedelta(seconds=dt)
        self.n += 1
        uid = f"{self.tag}-u{self.n}"
        base = {"uuid": uid, "parentUuid": self.parent, "sessionId": self.session,
                "timestamp": self.t.isoformat().replace("+00:00", "Z"),
                "cwd": SECRETS[1], "version": "2.0.1", "gitBranch": "main",
                "isSidechain": self.side, "userType": "external"}
        self.recs.append({**base, **rec})
        if chain:
            self.parent = uid
        return uid

    def user(self, blocks: list[dict[str, Any]], dt: float, **kw: Any) -> None:
        for b in blocks:
            text = b.get("text") or b.get("content") or ""
            self.hist.append(tokens.count(text) + (6 if b["type"] == "tool_result" else 3))
        self.msgs += 1
        self.add({"type": "user", "message": {"role": "user", "content": blocks}, **kw}, dt)

    def call(self, blocks: list[dict[str, Any]], model_s: float) -> None:
        prompt = PREFIX + int(TRUE_SCALE * sum(self.hist)) + 5 * self.msgs
        read = min(self.prev_prompt, prompt) if self.prev_prompt else PREFIX
        usage = {"input_tokens": 3, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": prompt - read - 3}
        sizes = [tokens.count(b.get("text") or json.dumps(b.get("input", {}))) for b in blocks]
        out = int(TRUE_SCALE * sum(sizes)) + 5
        mid = f"msg_{self.tag}_{self.n}"
        for i, b in enumerate(blocks):   # one line per block, placeholder output first
            last = i == len(blocks) - 1
            msg = {"id": mid, "type": "message", "role": "assistant", "model": "claude-x",
                   "content": [b], "stop_reason": ("tool_use" if b["type"] == "tool_use"
                                                   else "end_turn") if last else None,
                   "usage": {**usage, "output_tokens": out if last else 1}}
            self.add({"type": "assistant", "message": msg, "requestId": f"req_{mid}"},
                     model_s / len(blocks))
        self.hist += [s + 3 for s in sizes]
        self.msgs += 1
        self.prev_prompt = prompt

    def compact(self, summary: str) -> None:
        self.t += timedelta(seconds=20)
        self.n += 1
        uid = f"{self.tag}-u{self.n}"
        self.recs.append({"type": "system", "subtype": "compact_boundary", "uuid": uid,
                          "parentUuid": None, "logicalParentUuid": self.parent,
                          "timestamp": self.t.isoformat().replace("+00:00", "Z"),
                          "content": "Conversation compacted", "isSidechain": self.side,
                          "compactMetadata": {"trigger": "auto", "preTokens": self.prev_prompt}})
        self.parent = uid
        self.hist, self.msgs, self.prev_prompt = [], 0, 0
        self.user([{"type": "text", "text": summary}], 1.0, isCompactSummary=True)

    def write(self, path: Path, extra_lines: tuple[str, ...] = ()) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) for r in self.recs] + list(extra_lines)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


def _tool_turn(w: _Writer, rng: random.Random, files: dict[str, list[str]], i: int) -> None:
    """An assistant call ending in a tool call, then its result."""
    path = rng.choice(sorted(files))
    lines = files[path]
    r = rng.random()
    if r < 0.45:
        use = {"name": "Read", "input": {"file_path": path}}
        result = "\n".join(f"{n + 1:>6}→{x}" for n, x in enumerate(lines))
    elif r < 0.7:
        a = rng.randrange(max(1, len(lines) - 4))
        old = "\n".join(lines[a:a + 3])
        use = {"name": "Edit", "input": {"file_path": path, "old_string": old,
                                         "new_string": old.replace("compute", "evaluate")}}
        result = f"The file {path} has been updated."
    elif r < 0.9:
        use = {"name": "Bash", "input": {"command": f"cd {SECRETS[1]} && pytest -q"}}
        result = "\n".join(f"tests/test_{k}.py::test_{rng.choice(_WORDS)} PASSED"
                           for k in range(rng.randint(5, 40)))
    else:
        use = {"name": "Grep", "input": {"pattern": "token", "path": SECRETS[1]}}
        result = "\n".join(f"{path}:{k}:{lines[k % len(lines)]}" for k in range(10))
    tid = f"toolu_{w.session}_{i}"
    w.call([{"type": "text", "text": f"Next I will look at {path} as {SECRETS[3]}."},
            {"type": "tool_use", "id": tid, **use}], model_s=4.0)
    err = i % 37 == 5
    w.user([{"type": "tool_result", "tool_use_id": tid, "content":
             "Error: file changed on disk" if err else result, "is_error": err}],
           dt=rng.uniform(0.2, 3.0), toolUseResult={"stdout": result[:50]})


def make_project(root: Path, calls: int = 300, seed: int = 1) -> Path:
    """A project folder with one long main session and one sub-agent; returns it."""
    rng = random.Random(seed)
    t0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
    files = {f"{SECRETS[1]}/src/mod{k}.py": _code(rng, rng.randint(30, 160)) for k in range(25)}
    files[f"{SECRETS[1]}/.env"] = [f"API_KEY={SECRETS[0]}", f"HOST={SECRETS[2]}",
                                   f"AWS={SECRETS[4]}"] * 5
    w = _Writer("sess-main", False, t0)
    w.add({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}, chain=False)
    w.user([{"type": "text", "text": f"Fix the tests in {SECRETS[1]}; key {SECRETS[0]}"}], 0.0)
    sub_prompt = f"Search {SECRETS[1]} for uses of the retry handler"
    for i in range(calls):
        if i in (calls // 3, 2 * calls // 3):
            w.call([{"type": "text", "text": "Done with this part."}], model_s=2.0)
            w.compact("This session is being continued from a previous conversation. "
                      + " ".join(rng.choice(_WORDS) for _ in range(1500)))
            w.user([{"type": "text", "text": "Please continue."}], 1.0)
        elif i == calls // 6:
            tid = "toolu_task_1"
            w.call([{"type": "tool_use", "id": tid, "name": "Task",
                     "input": {"description": "search", "prompt": sub_prompt,
                               "subagent_type": "general-purpose"}}], model_s=3.0)
            sub_t0 = w.t
            w.add({"type": "progress", "data": {"type": "agent_progress"}}, chain=False)
            w.user([{"type": "tool_result", "tool_use_id": tid,
                     "content": "Found 3 uses of the retry handler."}], dt=120.0)
        elif i % 15 == 14:
            w.call([{"type": "text", "text": "Tests pass now. " * rng.randint(3, 30)}], 3.0)
            w.user([{"type": "text", "text": f"Now the next module please, ping {SECRETS[3]}"}],
                   dt=rng.uniform(10, 60))
        else:
            _tool_turn(w, rng, files, i)
    w.call([{"type": "text", "text": "All done."}], model_s=2.0)
    w.add({"type": "summary", "summary": f"Fixing tests in {SECRETS[1]}", "leafUuid": w.parent},
          chain=False)
    w.add({"type": "weird-new-type", "foo": 1}, chain=False)
    proj = root / "-home-alice-secretproj"
    w.write(proj / "sess-main.jsonl", extra_lines=('{"type": "user", "message": {tru',))
    s = _Writer("sess-main", True, sub_t0)
    s.user([{"type": "text", "text": sub_prompt}], 0.5)
    for j in range(10):
        _tool_turn(s, rng, files, 1000 + j)
    s.call([{"type": "text", "text": "Found 3 uses of the retry handler."}], 2.0)
    s.write(proj / "sess-main" / "subagents" / "agent-a1b2c3.jsonl")
    return proj


# ---------------------------------------------------------------- every format
SUB_PREFIX = 12_000   # a sub-agent's own system prompt and tool subset
FORMATS = ("parallel", "sidechain", "subagent", "compact_boundary", "summary_segments",
           "progress", "bom")


class _NewWriter(_Writer):
    """Newer Claude Code: one line per tool_use block and per tool_result, results
    written as they finish, each the child of the tool_use line it answers — so the
    uuid tree branches and the line with the response's final usage can sit on a side
    branch; progress records inside the chain."""

    def __init__(self, session: str, sidechain: bool, t0: datetime, prefix: int = PREFIX) -> None:
        super().__init__(session, sidechain, t0)
        self.prefix = prefix

    def usage_for(self, blocks: list[dict[str, Any]]) -> tuple[dict[str, int], int, list[int]]:
        prompt = self.prefix + int(TRUE_SCALE * sum(self.hist)) + 5 * self.msgs
        read = min(self.prev_prompt, prompt) if self.prev_prompt else self.prefix
        usage = {"input_tokens": 3, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": prompt - read - 3}
        sizes = [tokens.count(b.get("text") or json.dumps(b.get("input", {}))) for b in blocks]
        self.prev_prompt = prompt
        return usage, int(TRUE_SCALE * sum(sizes)) + 5, sizes

    def call(self, blocks: list[dict[str, Any]], model_s: float) -> None:
        usage, out, sizes = self.usage_for(blocks)
        mid = f"msg_{self.tag}_{self.n}"
        for i, b in enumerate(blocks):
            last = i == len(blocks) - 1
            msg = {"id": mid, "type": "message", "role": "assistant", "model": "claude-x",
                   "content": [b], "stop_reason": "end_turn" if last else None,
                   "usage": {**usage, "output_tokens": out if last else 1}}
            self.add({"type": "assistant", "message": msg, "requestId": f"req_{mid}"},
                     model_s / len(blocks))
        self.hist += [s + 3 for s in sizes]
        self.msgs += 1

    def parallel(self, text: str, uses: list[dict[str, Any]], results: list[str],
                 rng: random.Random, progress: bool = False) -> None:
        """One response with several tool calls, answered in completion order."""
        blocks = [{"type": "text", "text": text}] + [{"type": "tool_use", **u} for u in uses]
        usage, out, sizes = self.usage_for(blocks)
        mid = f"msg_{self.tag}_{self.n}"
        use_lines: list[str] = []
        for i, b in enumerate(blocks):
            last = i == len(blocks) - 1
            msg = {"id": mid, "type": "message", "role": "assistant", "model": "claude-x",
                   "content": [b], "stop_reason": "tool_use" if last else None,
                   "usage": {**usage, "output_tokens": out if last else 1}}
            uid = self.add({"type": "assistant", "message": msg, "requestId": f"req_{mid}"}, 1.0)
            if b["type"] == "tool_use":
                use_lines.append(uid)
        self.hist += [s + 3 for s in sizes]
        self.msgs += 1
        order = list(range(len(uses)))
        rng.shuffle(order)
        for k in order:
            self.parent = use_lines[k]          # a result hangs off its own tool_use line
            if progress:
                self.add({"type": "progress", "data": {"type": "bash_progress"},
                          "toolUseID": uses[k]["id"]}, 0.2)
            blk = {"type": "tool_result", "tool_use_id": uses[k]["id"], "content": results[k]}
            self.add({"type": "user", "message": {"role": "user", "content": [blk]},
                      "toolUseResult": {"stdout": results[k][:20]}}, rng.uniform(0.2, 2.0))
        for k in range(len(uses)):
            self.hist.append(tokens.count(results[k]) + 6)
        self.msgs += 1

    def compact(self, summary: str, trigger: str = "auto") -> None:
        super().compact(summary)
        self.recs[-2]["compactMetadata"]["trigger"] = trigger

    def segment(self, summary: str) -> None:
        """Older format: a new root whose first user message is the summary."""
        self.parent = None
        self.hist, self.msgs, self.prev_prompt = [], 0, 0
        self.user([{"type": "text", "text": summary}], 20.0, isCompactSummary=True)


def _read_result(lines: list[str], tail: bool) -> str:
    body = "\n".join(f"{n + 1:>6}→{x}" for n, x in enumerate(lines))
    return body + ("\n\n<system-reminder>\nWhenever you read a file, consider whether it "
                   "looks malicious.\n</system-reminder>\n" if tail else "")


def _agent_turns(w: _NewWriter, rng: random.Random, files: dict[str, list[str]], n: int,
                 tag: str, *, progress: bool = False, parallel: bool = True,
                 compact_at: dict[int, str] | None = None) -> None:
    """n calls: parallel Read/Grep/Bash/TaskCreate batches, Edits quoting earlier
    Reads, plain tool turns, the odd user message; compactions where asked."""
    compact_at = compact_at or {}
    read: list[str] = []
    for i in range(n):
        how = compact_at.get(i)
        if how is not None:
            w.call([{"type": "text", "text": "Done with this part."}], 2.0)
            summary = ("This session is being continued from a previous conversation. "
                       + " ".join(rng.choice(_WORDS) for _ in range(800)))
            if how == "segment":
                w.segment(summary)
            else:
                w.compact(summary, how)
            w.user([{"type": "text", "text": "Please continue."}], 1.0)
            continue
        paths = rng.sample(sorted(files), 3)
        if parallel and i % 3 == 0:
            uses = [{"id": f"toolu_{tag}_{i}_{k}", "name": "Read", "input": {"file_path": p}}
                    for k, p in enumerate(paths)]
            uses.append({"id": f"toolu_{tag}_{i}_t", "name": "TaskCreate",
                         "input": {"subject": "check", "description": "verify the tests"}})
            res = [_read_result(files[p], tail=k % 2 == 0) for k, p in enumerate(paths)]
            res.append("Task #1 created")
            w.parallel("Reading the files in parallel.", uses, res, rng, progress=progress)
            read += paths
        elif read and i % 3 == 1:
            p = rng.choice(read)
            a = rng.randrange(max(1, len(files[p]) - 4))
            old = "\n".join(files[p][a:a + 3])
            tid = f"toolu_{tag}_{i}"
            w.call([{"type": "text", "text": f"Editing {p}."},
                    {"type": "tool_use", "id": tid, "name": "Edit",
                     "input": {"file_path": p, "old_string": old,
                               "new_string": old.replace("compute", "evaluate")}}], 3.0)
            w.user([{"type": "tool_result", "tool_use_id": tid,
                     "content": f"The file {p} has been updated."}], 0.5)
        elif i % 7 == 5:
            w.call([{"type": "text", "text": "Progress so far. " * rng.randint(3, 20)}], 2.0)
            w.user([{"type": "text", "text": f"Go on, ping {SECRETS[3]}"}], rng.uniform(5, 30))
        else:
            uses = [{"id": f"toolu_{tag}_{i}_{k}", "name": name, "input": inp}
                    for k, (name, inp) in enumerate([
                        ("Bash", {"command": f"cd {SECRETS[1]} && pytest -q"}),
                        ("mcp__github__search", {"query": "retry handler"})])]
            res = ["\n".join(f"tests/test_{k}.py PASSED" for k in range(rng.randint(3, 30))),
                   "3 results"]
            if parallel:
                w.parallel("Running checks.", uses, res, rng, progress=progress)
            else:
                for u, r in zip(uses, res, strict=True):
                    w.call([{"type": "tool_use", **u}], 2.0)
                    w.user([{"type": "tool_result", "tool_use_id": u["id"], "content": r}], 1.0)


def make_format(root: Path, fmt: str, calls: int = 36, seed: int = 3) -> Path:
    """A project folder holding one transcript in the format `fmt` (see FORMATS)."""
    rng = random.Random(f"{seed}:{fmt}")
    t0 = datetime(2025, 9, 1, 8, 0, tzinfo=UTC)
    files = {f"{SECRETS[1]}/src/m{k}.py": _code(rng, rng.randint(20, 90)) for k in range(12)}
    proj = root / f"-proj-{fmt}"
    w = _NewWriter(f"s-{fmt}", False, t0)
    if fmt == "summary_segments":   # older versions put title summaries on top
        w.add({"type": "summary", "summary": "Fixing tests", "leafUuid": "x"}, chain=False)
    w.user([{"type": "text", "text": f"Fix the tests in {SECRETS[1]}"}], 0.0)
    compact_at = {"compact_boundary": {calls // 3: "auto", 2 * calls // 3: "manual"},
                  "summary_segments": {calls // 3: "segment", 2 * calls // 3: "segment"}}
    if fmt in ("sidechain", "subagent"):
        sub_prompt = f"Search {SECRETS[1]} for the retry handler"
        tid = "toolu_task_1"
        w.call([{"type": "tool_use", "id": tid, "name": "Task",
                 "input": {"description": "search", "prompt": sub_prompt,
                           "subagent_type": "general-purpose"}}], 3.0)
        s = _NewWriter(f"s-{fmt}" if fmt == "sidechain" else "agent-a1", True, w.t,
                       prefix=SUB_PREFIX)
        s.tag = "side"
        s.user([{"type": "text", "text": sub_prompt}], 0.5)
        _agent_turns(s, rng, files, calls // 2, "sub")
        s.call([{"type": "text", "text": "Found it in three places."}], 2.0)
        w.user([{"type": "tool_result", "tool_use_id": tid,
                 "content": "Found it in three places."}], 60.0)
        if fmt == "subagent":
            s.write(proj / f"s-{fmt}" / "subagents" / "agent-a1.jsonl")
        else:
            w.t = max(w.t, s.t)
    _agent_turns(w, rng, files, calls, "main", progress=fmt == "progress",
                 compact_at=compact_at.get(fmt))
    w.call([{"type": "text", "text": "All done."}], 2.0)
    path = w.write(proj / f"s-{fmt}.jsonl")
    if fmt == "sidechain":   # old in-file sidechain: its own root in the main file
        with path.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(json.dumps(r) for r in s.recs) + "\n")
    if fmt == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return proj
