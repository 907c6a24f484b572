# cython: language_level=3
"""Request-target routing (docs/configuration.md, Paths); the compiled twin of `clientmcp_fast/_pure/routing.py`."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp

from clientmcp_fast._pure.routing import (
    ROUTE_APP,
    ROUTE_CONNECT,
    ROUTE_HEALTHZ,
    ROUTE_MCP,
    ROUTE_NOT_FOUND,
    origin_form,
)

cdef tuple _NOT_FOUND = (ROUTE_NOT_FOUND, b"")
cdef tuple _CONNECT = (ROUTE_CONNECT, b"")
cdef tuple _MCP = (ROUTE_MCP, b"")
cdef tuple _HEALTHZ = (ROUTE_HEALTHZ, b"")


cpdef tuple route(bytes target):
    """The route of a request target, and the token of `/mcp/<token>` or the app of `/apps/<id>/mcp` (else b"")."""
    cdef const char* start = PyBytes_AS_STRING(target)
    if PyBytes_GET_SIZE(target) == 0 or start[0] != 0x2F:  # not "/": absolute-form, rare, done by the twin
        target = origin_form(target)
        start = PyBytes_AS_STRING(target)
    # memchr, not bytes.find: this runs on every request, and a method call costs more than the search.
    cdef const char* query = <const char*>memchr(start, 0x3F, PyBytes_GET_SIZE(target))  # "?"
    cdef bytes path = target if query == NULL else target[:query - start]
    cdef bytes token
    # The hot targets first: every agent request is /mcp.
    if path == b"/mcp":
        return _MCP
    if path.startswith(b"/mcp/"):
        token = path[5:]
        if token and b"/" not in token:
            return (ROUTE_MCP, token)
        return _NOT_FOUND
    if path == b"/connect":
        return _CONNECT
    if path == b"/healthz":
        return _HEALTHZ
    # /apps/<client-id>/mcp, read in place: its client ID is the one new object.
    cdef const char* p = PyBytes_AS_STRING(path)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(path)
    if (n > 10 and memcmp(p, b"/apps/", 6) == 0 and memcmp(p + n - 4, b"/mcp", 4) == 0
            and memchr(p + 6, 0x2F, n - 10) == NULL):
        return (ROUTE_APP, PyBytes_FromStringAndSize(p + 6, n - 10))
    return _NOT_FOUND
