"""The shared request prefix (tools, then system prompt), built once per run.

Byte-for-byte identical across sessions unless the scenario asks for a cache-buster
(a per-session or per-request nonce at the very start of the system prompt, as
Claude Code's attribution header did), so sessions share exactly what real clients
share.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from simulator.scenario import content
from simulator.scenario.load import load_tools_file, read_text_file
from simulator.scenario.model import Scenario
from simulator.session.conversation import Prefix
from simulator.util import tokens

# Synthesised prefixes by what they are made from, shared by the runs of one process:
# the probes of a search get the very same (immutable) object, so what is cached by
# its identity (the prompt's head ids, the in-process twin's plans) serves them all.
# Prefixes read from files are built afresh, as the files may change between runs.
_SYNTHESISED: dict[tuple[int, int | None, int, int | None], Prefix] = {}
_SYNTHESISED_HELD = 16


def build_base_prefix(s: Scenario) -> Prefix:
    """System prompt and tools from files or synthesised to their target sizes."""
    if s.system.file is None and s.tools.file is None:
        key = (s.seed, s.system.tokens, s.tools.count, s.tools.tokens)
        hit = _SYNTHESISED.get(key)
        if hit is None:
            hit = _build(s)
            if len(_SYNTHESISED) >= _SYNTHESISED_HELD:
                _SYNTHESISED.pop(next(iter(_SYNTHESISED)))
            _SYNTHESISED[key] = hit
        return hit
    return _build(s)


def _build(s: Scenario) -> Prefix:
    rng = random.Random(f"{s.seed}:prefix")
    base = Path(s.base_dir)
    if s.system.file is not None:
        system = read_text_file(base / s.system.file, "system file")
    else:
        system = content.synth_text("prose", s.system.tokens or 0, rng)
    if s.tools.file is not None:
        tools = load_tools_file(base / s.tools.file)
    else:
        tools = content.synth_tools(s.tools.count, s.tools.tokens or 0, rng)
    return Prefix(system, tools, tokens.count(system), content.tools_tokens(tools))


def with_nonce(prefix: Prefix, nonce: str) -> Prefix:
    """A copy whose system prompt starts with a cache-busting nonce."""
    head = f"x-anthropic-billing-header: cc_version=2.1; cch={nonce};\n"
    return Prefix(head + prefix.system, prefix.tools,
                  prefix.system_tokens_est + tokens.count(head), prefix.tools_tokens_est)


def tools_json(prefix: Prefix) -> str:
    return json.dumps(list(prefix.tools), separators=(",", ":"))
