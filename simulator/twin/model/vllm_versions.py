"""The vLLM release the twin imitates, and the defaults that changed between releases.

The twin's engine follows vLLM 0.32's code throughout. One default it models moved
between releases in a way that changes what a measured figure means: which
linear-attention (Mamba/GDN/KDA) states a hybrid model keeps for the prefix cache,
`prefix_cache_retention_interval` (None: a state at every block boundary a step ends
on, "dense"; 0: only the replay boundary and shared-prefix junctions; N: also every N
tokens). A figure measured on an older vLLM is compared with the twin of that version
(`twin.vllm_version`, or `engine.vllm_version` in a profile); an explicit
`prefix_cache_retention_interval` always wins, as it does in vLLM.

Per release, the default when the user sets nothing:

* up to 0.28: dense. The knob is the environment variable
  `VLLM_PREFIX_CACHE_RETENTION_INTERVAL` (PR 43447 for sliding windows, PR 45845 for
  Mamba/linear attention), unset by default: every boundary keeps its state ("on 0.28
  the same knob is an env var and dense is merely the default", syv-ai/qwen38-27b-rtx3090
  issue 183, reading 0.28 and 0.29.0's `arg_utils.py`).
* from 0.29: 0 (PR 52216 promoted it to `--prefix-cache-retention-interval` and changed
  the default from None to 0), except a hybrid model with an EAGLE-style drafter
  (`SpeculativeConfig.use_eagle()`: EAGLE, EAGLE-3 and MTP heads; the twin's `mtp:K`),
  which stays dense (PR 55760, in 0.29.0's `arg_utils.py`, logged as "Hybrid model with
  EAGLE speculative decoding: defaulting prefix_cache_retention_interval to dense
  checkpointing"). n-gram and draft-model speculation keep 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simulator.errors import InputError

DEFAULT_VERSION = "0.32"            # the release whose code the twin follows
OLDEST, NEWEST = (0, 11), (0, 32)   # hybrid prefix caching (align mode) … the twin's code
SPARSE_FROM = (0, 29)               # PR 52216's default 0 (and PR 55760's EAGLE exception)
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


@dataclass(frozen=True, slots=True)
class RetentionDefault:
    """A release's default retention for hybrids, and why (for `twin show`)."""

    interval: int | None        # None: dense
    reason: str


def parse_version(text: str) -> tuple[int, int]:
    """`0.28`, `v0.29.1` … → (major, minor); InputError outside the releases modelled."""
    m = _VERSION_RE.match(str(text).strip())
    if m is None:
        raise InputError(f"vllm_version: expected a release such as 0.28 or 0.32, got {text!r}")
    v = (int(m.group(1)), int(m.group(2)))
    if not OLDEST <= v <= NEWEST:
        raise InputError(f"vllm_version: {text} is outside the releases the twin models "
                         f"({OLDEST[0]}.{OLDEST[1]} … {NEWEST[0]}.{NEWEST[1]}: hybrid prefix "
                         f"caching's align mode up to the code the twin follows)")
    return v


def retention_default(version: str, *, eagle_drafter: bool) -> RetentionDefault:
    """The `prefix_cache_retention_interval` vLLM `version` uses for a hybrid model when
    the user sets none; `eagle_drafter`: speculation with an EAGLE-style head (MTP)."""
    v = parse_version(version)
    if v < SPARSE_FROM:
        return RetentionDefault(None, f"vLLM {version}: dense (VLLM_PREFIX_CACHE_RETENTION_"
                                      f"INTERVAL unset; the 0 default came with 0.29, PR 52216)")
    if eagle_drafter:
        return RetentionDefault(None, f"vLLM {version}: dense for a hybrid with an EAGLE-style "
                                      f"drafter (PR 55760)")
    return RetentionDefault(0, f"vLLM {version}: 0, replay boundary and shared-prefix "
                               f"junctions only (PR 52216)")


def describe_retention(interval: int | None) -> str:
    """One phrase for an interval value."""
    if interval is None:
        return "dense (a state at every block boundary a step ends on)"
    if interval == 0:
        return "0 (the replay boundary and shared-prefix junctions)"
    return f"{interval} (also every {interval} tokens)"
