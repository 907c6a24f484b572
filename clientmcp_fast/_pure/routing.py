"""Request-target routing (docs/configuration.md, Paths); the pure-Python twin of `_speedups/routing.pyx`."""

from __future__ import annotations

ROUTE_NOT_FOUND = 0
ROUTE_CONNECT = 1
ROUTE_MCP = 2
ROUTE_HEALTHZ = 3
ROUTE_APP = 4  # /apps/<client-id>/mcp: an app's own resource when OAuth is on (docs/oauth.md)

_EXACT = {
    b"/connect": ROUTE_CONNECT,
    b"/mcp": ROUTE_MCP,
    b"/healthz": ROUTE_HEALTHZ,
}


def origin_form(target: bytes) -> bytes:
    """The path and query of a request target: an absolute-form one loses its scheme and authority.

    RFC 9112 §3.2.2: a server must accept `POST http://host/mcp HTTP/1.1` as it does
    `POST /mcp`. Any other target (origin-form, `*`, junk) is returned as it is.
    """
    if target[:1] == b"/":
        return target
    scheme_end = target.find(b"://")
    if scheme_end <= 0 or target[:scheme_end].lower() not in (b"http", b"https"):
        return target
    authority_start = scheme_end + 3
    end = len(target)
    for separator in (b"/", b"?"):  # the authority ends where the path or the query begins
        found = target.find(separator, authority_start)
        if 0 <= found < end:
            end = found
    rest = target[end:]
    return rest if rest[:1] == b"/" else b"/" + rest


def route(target: bytes) -> tuple[int, bytes]:
    """The route of a request target, and the token of `/mcp/<token>` or the app of `/apps/<id>/mcp` (else b"")."""
    if target[:1] != b"/":
        target = origin_form(target)
    query = target.find(b"?")
    path = target if query < 0 else target[:query]
    kind = _EXACT.get(path)
    if kind is not None:
        return kind, b""
    if path.startswith(b"/mcp/"):
        token = path[5:]
        if token and b"/" not in token:
            return ROUTE_MCP, token
    elif path.startswith(b"/apps/") and path.endswith(b"/mcp"):
        app_id = path[6:-4]
        if app_id and b"/" not in app_id:
            return ROUTE_APP, app_id
    return ROUTE_NOT_FOUND, b""
