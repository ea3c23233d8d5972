"""Limits before parsing: a request's size and rate are bounded before anyone reads its body.

A shared service is attacked by its own users (and by anyone who can reach its port): an unauthenticated
50 MB POST parsed before its 401 cost seconds of the event loop and hundreds of megabytes. So, as an ASGI
middleware in front of every route:

- a request declaring a body over ``max_body_bytes`` (``Content-Length``) is answered 413 before a byte of
  it is read, and one that streams more than that without declaring it is cut off at the limit (413);
- a request to the API that carries a body must carry a token the store knows, checked before the body
  is read (401 otherwise), so nobody unknown gets a body parsed;
- requests per token are bounded (``rate_per_s`` sustained, ``burst`` at once; 429 with ``Retry-After``
  beyond), so one user's loop cannot starve the others.

Every refusal is JSON in the API's error shape (``error``, and ``detail`` as FastAPI writes it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths whose requests need no token (the rest of the API checks its own; these limits only add to it).
_OPEN_PREFIXES = ("/healthz", "/metrics", "/docs", "/openapi.json", "/ui/", "/static/")


@dataclass
class TokenBuckets:
    """One token bucket per bearer token: ``rate_per_s`` refilled, at most ``burst`` held."""

    rate_per_s: float
    burst: float
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str, now: float) -> float:
        """0 when the request may go; else the seconds until it could."""
        with self._lock:
            level, last = self._buckets.get(key, (self.burst, now))
            level = min(self.burst, level + (now - last) * self.rate_per_s)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, now)
                return 0.0
            self._buckets[key] = (level, now)
            return (1.0 - level) / self.rate_per_s

    def forget_full(self, now: float) -> None:
        """Drop buckets that are full again (the map stays as small as the set of active tokens)."""
        with self._lock:
            full = [k for k, (level, last) in self._buckets.items()
                    if level + (now - last) * self.rate_per_s >= self.burst]
            for k in full:
                del self._buckets[k]


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def _answer(send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error, "detail": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """The middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, known_token: Callable[[str], bool],
                 rate_per_s: float = 50.0, burst: float = 200.0) -> None:
        self.app, self.max_body_bytes, self.known_token = app, max_body_bytes, known_token
        self.buckets = TokenBuckets(rate_per_s, burst)
        self._sweep = time.monotonic()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and (declared < 0 or declared > self.max_body_bytes):
            await _answer(send, 413, f"the request body is over the limit of {self.max_body_bytes} bytes"
                          if declared >= 0 else "Content-Length is not a number")
            return
        path = str(scope.get("path", ""))
        token = _bearer(scope)
        if not path.startswith(_OPEN_PREFIXES):
            now = time.monotonic()
            if now - self._sweep > 60.0:
                self.buckets.forget_full(now)
                self._sweep = now
            wait = self.buckets.take(token or f"addr:{(scope.get('client') or ('?',))[0]}", now)
            if wait > 0:
                await _answer(send, 429, "too many requests for this token", [(b"retry-after",
                                                                               str(max(1, round(wait))).encode())])
                return
        has_body = scope.get("method") in ("POST", "PUT", "PATCH") and (declared is None or declared > 0)
        if has_body and not path.startswith(_OPEN_PREFIXES) and (token is None or not self.known_token(token)):
            await _answer(send, 401, "missing or invalid token", [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, *self._bounded(receive, send))

    def _bounded(self, receive: Receive, send: Send) -> tuple[Receive, Send]:
        """``receive`` that stops a body streamed past the limit (answered 413; the route then sees a
        disconnect), and ``send`` that drops what the route would answer after that."""
        seen = 0
        answered = False
        limit = self.max_body_bytes

        async def bounded() -> Message:
            nonlocal seen, answered
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    if not answered:
                        answered = True
                        await _answer(send, 413, f"the request body is over the limit of {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            if not answered:
                await send(message)

        return bounded, guarded
