"""Secrets never stored or shown: redaction of URLs, texts and header maps.

Keys ride in URLs (``https://user:key@host/``, ``?api_key=…``) and in headers; anything
this tool writes (manifest, summary, journals' error messages, the one-line errors on
stderr) goes through here first. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# Names of query parameters whose values are secrets.
SECRET_NAME = re.compile(r"key|token|secret|auth|passw|pwd|credential|signature|sig$",
                         re.IGNORECASE)
# Names of headers and JSON keys whose (string) values are secrets.
SECRET_FIELD = re.compile(r"^(x-)?api[-_]?key$|^(proxy-)?authorization$|passw|secret|^token$"
                          r"|access[-_]token|^cookie$|^bearer$", re.IGNORECASE)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """`url` with user info masked and secret-named query values masked; anything that
    does not even split as a URL keeps only its scheme."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, MASK if SECRET_NAME.search(k) else v) for k, v in pairs],
                              safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return f"{url.split(':', 1)[0]}://{MASK}"


def redact_text(text: str) -> str:
    """Every URL inside free text redacted (error messages quote URLs)."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def redact(obj: object) -> object:
    """A JSON-like value with secrets masked: URLs in strings, and the values of keys
    named like secrets (headers, `api_key`), except mere names such as `api_key_env`."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        return {k: (MASK if isinstance(k, str) and SECRET_FIELD.search(k) and isinstance(v, str)
                    and v else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact(v) for v in obj]
    return obj



def check_endpoint_url(url: str, what: str = "--endpoint") -> None:
    """Raise ValueError (one line, the URL redacted) unless `url` is an http(s) base URL
    every client can use: a host, a port within 1–65535, no spaces or control characters,
    and no credentials in it (not every client sends user info; keys go in headers)."""
    shown = redact_url(url)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValueError(f"{what} {shown!r}: contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        why = "port must be within 1-65535" if "port" in str(exc).lower() else str(exc)
        raise ValueError(f"{what} {shown!r}: {why}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {shown!r}: expected http(s)://host[:port]")
    if port == 0:
        raise ValueError(f"{what} {shown!r}: port must be within 1-65535")
    if "@" in parts.netloc:
        raise ValueError(f"{what} {shown!r}: credentials in the URL are refused (not every "
                         "client sends them, and they would be stored); put the key in "
                         "$ANTHROPIC_API_KEY or a file given with --api-key-file")


def read_key_file(path: str) -> str:
    """The API key in `path` (first line, stripped); ValueError naming the file otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read(65536).splitlines()[0].strip()
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        why = "empty" if isinstance(exc, IndexError) else getattr(exc, "strerror", None) or \
            type(exc).__name__
        raise ValueError(f"--api-key-file {path}: cannot read a key ({why})") from None
    if not key:
        raise ValueError(f"--api-key-file {path}: the first line is empty")
    return key


def check_key(key: str, source: str) -> str:
    """`key` unless it holds characters no HTTP header may carry (spaces, control or
    non-ASCII characters: a pasted newline); ValueError naming `source`, never the key."""
    if any(not 33 <= ord(c) <= 126 for c in key):
        raise ValueError(f"the API key from {source} contains spaces, control or non-ASCII "
                         "characters")
    return key
