"""The agent endpoint's checks of headers: Origin and CORS, the agent token, Accept, and header values.

An agent chooses its header values, and sends the same ones again and again: what its
Authorization, Accept and Mcp-Name headers mean is read once and remembered, within bounds.
"""

from __future__ import annotations

import re

from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.agent_context import JSON_HEADERS
from clientmcp_fast.core.events import EventLog
from clientmcp_fast.core.http import Exchange, Headers
from clientmcp_fast.core.jsonrpc import INVALID_REQUEST, NULL_ID
from clientmcp_fast.core.memo import remember
from clientmcp_fast.core.param_headers import decode_header_value
from clientmcp_fast.core.tokens import ROLE_AGENT, Grant, TokenError, TokenVerifier

ALLOW = (b"allow", b"GET, POST, OPTIONS")

_HTTP_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_LOOPBACK_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?")
_ACCEPT_ENTRIES = 256


def header_text(value: bytes, known: dict[bytes, str]) -> str:
    """A header's value as text, trimmed; the usual values are looked up rather than decoded."""
    return known.get(value) or value.strip().decode("latin-1")


# The memos of header values that agents choose (their Authorization, their Mcp-Name) are
# bounded in entries and in the length of a value kept: distinct or huge values, sent
# without end, cost at most about 2 x 1,024 x 2 KiB per memo.
_MEMO_ENTRIES = 1_024
_MEMO_VALUE_BYTES = 2_048
_UNSEEN = object()


def remember_value(memo: dict, value: bytes, meaning: object) -> None:
    """Keep what a header value means, unless the value is too long (see `memo.remember`)."""
    if len(value) <= _MEMO_VALUE_BYTES:
        remember(memo, value, meaning, _MEMO_ENTRIES)


# -- Origin and CORS (ClientMCP v1 §4.5, docs/protocol.md) --------------------------------------


def origin_allowed(allowed: set[str] | None, origin: bytes) -> bool:
    """Whether an Origin may use the endpoint: `allowed` lowercased, or None for loopback origins only."""
    text = origin.decode("latin-1").strip().lower()
    if allowed is None:
        return _LOOPBACK_ORIGIN.fullmatch(text) is not None
    return "*" in allowed or text in allowed


def cors_headers(origin: bytes) -> Headers:
    """What every answer to an allowed Origin carries."""
    return (
        (b"access-control-allow-origin", origin),
        (b"vary", b"Origin"),
        (b"access-control-expose-headers", b"Mcp-Session-Id, WWW-Authenticate"),
    )


def preflight(exchange: Exchange, origin: bytes | None, cors: Headers) -> None:
    """Answer an OPTIONS request; no token is needed for it."""
    if origin is None:
        exchange.respond(204, (ALLOW,), b"")
        return
    requested = exchange.request.headers.get(b"access-control-request-headers", b"")
    names = [name.strip() for name in requested.split(b",") if name.strip()]
    if not all(_HTTP_TOKEN.fullmatch(name) for name in names):
        exchange.respond(400, cors, b"")
        return
    headers = [
        *cors,
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-max-age", b"86400"),
    ]
    if names:
        headers.append((b"access-control-allow-headers", b", ".join(names)))
    exchange.respond(204, headers, b"")


# -- the agent token (ClientMCP v1 §4) ----------------------------------------------------------


def parse_bearer(authorization: bytes) -> bytes | None:
    """The token of `Authorization: Bearer <token>` (RFC 6750 §2.1); None for another scheme or no token."""
    scheme, _, value = authorization.strip().partition(b" ")
    value = value.strip()
    return value if scheme.lower() == b"bearer" and value else None


def bearer_token(cache: dict[bytes, bytes], authorization: bytes) -> bytes | None:
    """The token of an Authorization value, each value parsed once (see `remember_value`)."""
    token = cache.get(authorization)
    if token is None:
        token = parse_bearer(authorization) or b""  # b"": read, and no token
        remember_value(cache, authorization, token)
    return token or None


def authenticate(
    verifier: TokenVerifier,
    cache: dict[bytes, bytes],
    exchange: Exchange,
    authorization: bytes | None,
    path_token: bytes,
    cors: Headers,
    now: float,
    events: EventLog,
) -> Grant | None:
    """The grant of the agent token (its client ID, scope, limits); None after answering 401 (ClientMCP v1 §4).

    `cache` remembers the token of each Authorization value (see `remember_value`); `events`
    is told of each 401 (at `debug`).
    """
    token = None
    if authorization is not None:
        token = bearer_token(cache, authorization)
    if token is None and path_token:
        token = path_token
    if token is None:
        problem = "no agent token: send Authorization: Bearer <token>"
        challenge = b"Bearer"
    else:
        try:
            return verifier.grant(token, ROLE_AGENT, now)
        except TokenError as error:
            problem = str(error)
            challenge = b'Bearer error="invalid_token"'
    events.agent_unauthorized(problem)
    exchange.respond(
        401,
        (*JSON_HEADERS, *cors, (b"www-authenticate", challenge)),
        jsonrpc.error(NULL_ID, INVALID_REQUEST, f"Unauthorized: {problem}"),
    )
    return None


def over_rate(grant: Grant, rate: float, now: float) -> int:
    """0 when the token may make this request (one is taken); else the whole seconds until it may.

    A token bucket per token (--agent-rate), refilled by `now`: it holds one second of requests
    (at least one), so a burst of `rate` requests at once is served, then `rate` a second.
    """
    capacity = rate if rate > 1.0 else 1.0
    allowance = grant.allowance + (now - grant.allowance_at) * rate
    if allowance > capacity:
        allowance = capacity
    grant.allowance_at = now
    if allowance >= 1.0:
        grant.allowance = allowance - 1.0
        return 0
    grant.allowance = allowance
    wait = (1.0 - allowance) / rate
    seconds = int(wait)  # Retry-After is whole seconds (RFC 9110 §10.2.3): rounded up, at least 1
    return seconds + 1 if seconds < wait or seconds == 0 else seconds


# -- Accept (docs/protocol.md, Which era serves a request) --------------------------------------


def media_accepted(cache: dict[bytes | None, tuple[bool, bool, bool]], accept: bytes | None) -> tuple:
    """(JSON acceptable, SSE acceptable, SSE named explicitly) for an Accept header; `cache` remembers."""
    parsed = cache.get(accept)
    if parsed is None:
        parsed = _parse_accept(accept)
        remember(cache, accept, parsed, _ACCEPT_ENTRIES)
    return parsed


def _parse_accept(value: bytes | None) -> tuple[bool, bool, bool]:
    """From an Accept header: (JSON acceptable, SSE acceptable, SSE named explicitly)."""
    if value is None:
        return True, True, False  # no Accept header means */* (docs/protocol.md, Which era serves a request)
    json_ok = sse_ok = sse_named = False
    for item in value.split(b","):
        media, *parameters = item.split(b";")
        media = media.strip().lower()
        refused = False
        for parameter in parameters:
            key, _, weight = parameter.partition(b"=")
            if key.strip().lower() == b"q":
                try:
                    refused = float(weight.strip()) <= 0
                except ValueError:
                    refused = True
        if refused:
            continue
        if media in (b"application/json", b"application/*", b"*/*"):
            json_ok = True
        if media in (b"text/event-stream", b"text/*", b"*/*"):
            sse_ok = True
        if media == b"text/event-stream":
            sse_named = True
    return json_ok, sse_ok, sse_named


# -- Mcp-Name (MCP 2026-07-28, basic/transports) -----------------------------------------------


def named_tool(cache: dict[bytes, str | None], mcp_name: bytes | None) -> str | None:
    """The tool name an Mcp-Name header says (base64 sentinel undone); None when absent or undecodable."""
    if mcp_name is None:
        return None
    decoded = cache.get(mcp_name, _UNSEEN)
    if decoded is _UNSEEN:
        decoded = decode_header_value(mcp_name.strip(b" \t").decode("latin-1"))
        remember_value(cache, mcp_name, decoded)
    return decoded
