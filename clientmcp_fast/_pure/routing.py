"""Request-target routing (docs/configuration.md, Paths); the pure-Python twin of `_speedups/routing.pyx`."""

from __future__ import annotations

ROUTE_NOT_FOUND = 0
ROUTE_CONNECT = 1
ROUTE_MCP = 2
ROUTE_HEALTHZ = 3
# Only when the server runs with the WebSocket echo endpoint on (Autobahn runs in tests).
ROUTE_ECHO = 4

_EXACT = {
    b"/connect": ROUTE_CONNECT,
    b"/mcp": ROUTE_MCP,
    b"/healthz": ROUTE_HEALTHZ,
    b"/_echo": ROUTE_ECHO,
}


def route(target: bytes) -> tuple[int, bytes]:
    """The route of a request target, and the agent token of `/mcp/<token>` (else b"")."""
    query = target.find(b"?")
    path = target if query < 0 else target[:query]
    kind = _EXACT.get(path)
    if kind is not None:
        return kind, b""
    if path.startswith(b"/mcp/"):
        token = path[5:]
        if token and b"/" not in token:
            return ROUTE_MCP, token
    return ROUTE_NOT_FOUND, b""
