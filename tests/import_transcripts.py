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

from simulator import tokens

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

    def add(self, rec: dict[str, Any], dt: float = 1.0, chain: bool = True) -> str:
        self.t += timedelta(seconds=dt)
        self.n += 1
        uid = f"{self.session}-u{self.n}"
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
        mid = f"msg_{self.session}_{self.n}"
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
        uid = f"{self.session}-u{self.n}"
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
