"""`endurance check URL --against URL2`: is speculation (or any change) lossless?

The same greedy, code-heavy probes go to both endpoints (temperature 0, non-streaming);
every probe whose two replies differ is reported with a unified diff. Speculative
decoding is supposed to change nothing under greedy sampling; a self-hoster's published
vLLM measurements record a case where an n-gram path corrupted generated code, which only targeted code probes
caught (prose and literal copies stayed correct), so the probes are code.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass

import aiohttp

from simulator.check.client import CheckClient, listed_ids
from simulator.util.jsontypes import JSONObject, as_list

_CODE = '''def merge_intervals(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    items = sorted(items)
    out: list[tuple[int, int]] = []
    for a, b in items:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def sub(a: int, b: int) -> int:
    return a - b
'''

# (name, user message): copies, edits and fresh code, where n-gram drafts are long
PROBES: tuple[tuple[str, str], ...] = (
    ("copy-code", f"Repeat this Python code exactly, nothing else:\n\n{_CODE}"),
    ("edit-code", "Add a docstring to every function below and return the whole file, "
                  f"nothing else:\n\n{_CODE}"),
    ("rename", f"Rename `items` to `spans` everywhere and return the whole file:\n\n{_CODE}"),
    ("fresh-code", "Write a Python function `lcs(a: str, b: str) -> str` returning the "
                   "longest common subsequence, with a short test. Code only."),
    ("arith-code", "Write Python functions add, sub, mul and div of two ints, each one "
                   "line, then a table of their results for (7, 3). Code only."),
    ("repetitive", "Write a Python dict literal mapping the numbers 1 to 30 to their "
                   "English names. Code only."),
)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe on both endpoints: the two texts (None with an error), and why."""

    name: str
    text_a: str | None
    text_b: str | None
    error: str = ""

    @property
    def same(self) -> bool:
        return self.text_a is not None and self.text_a == self.text_b

    def diff(self, label_a: str = "a", label_b: str = "b") -> str:
        """Unified diff of the two replies ('' when equal or missing)."""
        if self.text_a is None or self.text_b is None or self.same:
            return ""
        return "".join(difflib.unified_diff(self.text_a.splitlines(keepends=True),
                                            self.text_b.splitlines(keepends=True),
                                            fromfile=label_a, tofile=label_b))


async def served_model(c: CheckClient, model: str | None) -> str:
    """`model`, else the first id of /v1/models, else "default"."""
    if model:
        return model
    ids = listed_ids((await c.get("/v1/models")).json())
    return ids[0] if ids and isinstance(ids[0], str) else "default"


async def _ask(c: CheckClient, model: str, prompt: str, max_tokens: int) -> str:
    body: JSONObject = {"model": model, "max_tokens": max_tokens, "temperature": 0,
                            "messages": [{"role": "user", "content": prompt}]}
    reply = await c.post("/v1/messages", body)
    data = reply.json()
    if reply.status != 200 or not isinstance(data, dict):
        raise RuntimeError(f"HTTP {reply.status}: {reply.snippet()}")
    return "".join(t for b in as_list(data.get("content"))
                   if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(t := b.get("text", ""), str))


async def compare_endpoints(url_a: str, url_b: str, *, model_a: str | None = None,
                            model_b: str | None = None, api_key: str | None = None,
                            timeout_s: float = 120.0,
                            max_tokens: int = 400) -> list[ProbeResult]:
    """Send every probe to both endpoints (one at a time each, both concurrently)."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as sa, \
            aiohttp.ClientSession(timeout=timeout) as sb:
        ca = CheckClient(sa, url_a, api_key=api_key)
        cb = CheckClient(sb, url_b, api_key=api_key)
        ma, mb = await asyncio.gather(served_model(ca, model_a),
                                        served_model(cb, model_b))
        out = []
        for name, prompt in PROBES:
            try:
                ta, tb = await asyncio.gather(_ask(ca, ma, prompt, max_tokens),
                                              _ask(cb, mb, prompt, max_tokens))
            except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
                out.append(ProbeResult(name, None, None, f"{type(exc).__name__}: {exc}"))
                continue
            out.append(ProbeResult(name, ta, tb))
        return out
