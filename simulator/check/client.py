"""Raw HTTP for the check: exact status, headers and body bytes, no SDK in between.

The check is about the wire protocol, so it uses aiohttp directly and keeps the bytes
(an SDK would silently repair or drop what we want to see).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from simulator.util.jsontypes import JSONObject, JSONValue, as_list, as_object

ANTHROPIC_VERSION = "2023-06-01"

Body = Mapping[str, object]      # a request's JSON body, as the checks build it


@dataclass(frozen=True, slots=True)
class RawReply:
    """One HTTP exchange: status, content type, body bytes and elapsed seconds."""

    status: int
    content_type: str
    body: bytes
    elapsed_s: float
    twin: bool = False          # the server announced itself as endurance's HTTP twin

    def json(self) -> JSONValue:
        """The body as JSON, or None when it is not JSON."""
        try:
            value: JSONValue = json.loads(self.body)
        except (ValueError, RecursionError):     # not JSON, or nested past the parser
            return None
        return value

    def json_object(self) -> JSONObject:
        """The body as a JSON object; {} when it is not one (a lying server's list,
        number or HTML reads as an object with no fields)."""
        return as_object(self.json())

    def snippet(self, n: int = 160) -> str:
        return self.body[:n].decode("utf-8", errors="replace").replace("\n", "\\n")


# What aiohttp raises when a pooled connection turns out to be closed by the server
# before our request got an answer (ClientConnectorError, a refused connect, is not one).
STALE_CONNECTION_ERRORS = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)

# The most body bytes one check reply may hold (a reply is kilobytes; a lying server's
# 1 GB JSON body fails the check that asked, in bounded memory).
MAX_BODY_BYTES = 16 * 2**20


class BodyTooLarge(aiohttp.ClientPayloadError):
    """A reply body past MAX_BODY_BYTES (an aiohttp.ClientError: the check fails)."""


async def _read_bounded(content: aiohttp.StreamReader) -> bytes:
    """The body, stopping once it passes MAX_BODY_BYTES (at most one read more)."""
    parts: list[bytes] = []
    got = 0
    while got <= MAX_BODY_BYTES:
        chunk = await content.read(MAX_BODY_BYTES + 1 - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


SPENT = "not run: the check's --timeout was spent"


class CheckClient:
    """POSTs/GETs against one base URL with Anthropic headers; one session per check run."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, *,
                 api_key: str | None, deadline: float | None = None) -> None:
        self.session = session
        # loop time after which no request may run (`check --timeout`: the whole check)
        self.deadline = deadline
        self.base_url = base_url.rstrip("/")
        self.stale_connections = 0
        self.headers = {"content-type": "application/json",
                        "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self.headers["x-api-key"] = api_key
            self.headers["authorization"] = f"Bearer {api_key}"

    def spent(self) -> bool:
        """Is the whole check's --timeout spent (nothing more may run)?"""
        return self.deadline is not None and _now() >= self.deadline

    async def post(self, path: str, body: object) -> RawReply:
        """POST JSON (`body` may be bytes to send something malformed on purpose)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self._request("POST", path, data)

    async def get(self, path: str) -> RawReply:
        return await self._request("GET", path, None)

    async def _request(self, method: str, path: str, data: bytes | None) -> RawReply:
        """One request; a pooled keep-alive connection the server had silently closed
        (llama.cpp does after requests with tools) is retried once on a fresh one, and
        counted in `stale_connections` so the check can report it."""
        for retry in (False, True):
            loop_time = _now()
            left = None if self.deadline is None else self.deadline - loop_time
            if left is not None and left <= 0:
                raise TimeoutError(SPENT)
            try:
                async with asyncio.timeout(left), self.session.request(
                        method, self.base_url + path, data=data,
                        headers=self.headers) as resp:
                    body = await _read_bounded(resp.content)
                    if len(body) > MAX_BODY_BYTES:
                        raise BodyTooLarge(f"{method} {path}: reply body larger than "
                                           f"{MAX_BODY_BYTES} bytes")
                    return RawReply(resp.status, resp.headers.get("content-type", ""), body,
                                    _now() - loop_time, "x-endurance-twin" in resp.headers)
            except STALE_CONNECTION_ERRORS as exc:
                if retry or isinstance(exc, aiohttp.ClientConnectorError):
                    raise
                self.stale_connections += 1
        raise AssertionError("unreachable")  # pragma: no cover


def _now() -> float:
    """Monotonic seconds (the running loop's clock)."""
    return asyncio.get_running_loop().time()


def listed_ids(data: JSONValue) -> list[JSONValue]:
    """The `id` of each entry of a /v1/models listing (`data`: its body)."""
    return [m.get("id") for m in as_list(as_object(data).get("data")) if isinstance(m, dict)]
