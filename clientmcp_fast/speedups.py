"""Picks the compiled hot paths from `_speedups/` or their pure-Python twins in `_pure/`.

`CLIENTMCP_NO_EXTENSIONS=1` (or a Python other than CPython) selects the twins; otherwise the
compiled modules are used when they were built, quietly falling back when they were not, and
with a warning when they were built but do not load here. `IMPLEMENTATION` says which is
live: "compiled" or "pure". The typed modules of `compiled.TYPED` have no twin: each .py is
itself compiled (see clientmcp_fast/__init__.py).
"""

from __future__ import annotations

import warnings

import clientmcp_fast
from clientmcp_fast import compiled

TYPED_MODULES = tuple(f"clientmcp_fast.{name}" for name in compiled.TYPED)

NO_EXTENSIONS = clientmcp_fast.NO_EXTENSIONS
if not NO_EXTENSIONS:
    try:
        import clientmcp_fast._speedups.frames as frames
        import clientmcp_fast._speedups.http_reader as http_reader
        import clientmcp_fast._speedups.routing as routing
        import clientmcp_fast._speedups.splice as splice
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("clientmcp_fast._speedups."):
            raise
        NO_EXTENSIONS = True  # not built (as the build said): nothing to add
    except ImportError as error:  # built, but failing to load here (built for another platform)
        warnings.warn(
            f"clientmcp_fast extensions not used ({error}); using the pure-Python twins", stacklevel=1
        )
        NO_EXTENSIONS = True
if NO_EXTENSIONS:
    from clientmcp_fast._pure import frames, http_reader, routing, splice  # noqa: F811

IMPLEMENTATION = "pure" if NO_EXTENSIONS else "compiled"


def build() -> str:
    """What runs: "compiled" (hot paths and typed modules), "pure" (neither), else "mixed"."""
    import importlib
    from importlib.machinery import EXTENSION_SUFFIXES

    typed = [
        (importlib.import_module(name).__file__ or "").endswith(tuple(EXTENSION_SUFFIXES))
        for name in TYPED_MODULES
    ]
    if IMPLEMENTATION == "compiled" and all(typed):
        return "compiled"
    if IMPLEMENTATION == "pure" and not any(typed):
        return "pure"
    return "mixed"


# Opcodes, fixed frames, route kinds, the request reader's state bits and header names, and
# result shapes are plain constants: one definition serves both twins.
from clientmcp_fast._pure.errors import FrameError  # noqa: E402
from clientmcp_fast._pure.frames import (  # noqa: E402
    EXACT_PING,
    EXACT_PONG,
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_EXACT_PING,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    PONG_FRAME,
)
from clientmcp_fast._pure.http_reader import (  # noqa: E402
    EXPECTS_CONTINUE,
    KNOWN_INDEX,
    KNOWN_NAMES,
    READING_BODY,
    READING_HEAD,
    REFUSED,
    STOPPED,
)
from clientmcp_fast._pure.routing import (  # noqa: E402
    ROUTE_APP,
    ROUTE_CONNECT,
    ROUTE_HEALTHZ,
    ROUTE_MCP,
    ROUTE_NOT_FOUND,
)
from clientmcp_fast._pure.splice import NOT_TEXT, SHAPE_BAD, SHAPE_CONTENT, SHAPE_ERROR, SHAPE_TYPED  # noqa: E402

FrameReader = frames.FrameReader
build_frame = frames.build_frame
build_close = frames.build_close
unmask = frames.unmask
route = routing.route
RequestReader = http_reader.RequestReader
first_byte = splice.first_byte
json_id = splice.json_id
jsonrpc_result = splice.jsonrpc_result
complete_result = splice.complete_result
json_member = splice.json_member
call_message = splice.call_message
traced_call_message = splice.traced_call_message
result_shape = splice.result_shape
array_length = splice.array_length

__all__ = [
    "IMPLEMENTATION",
    "FrameError",
    "FrameReader",
    "build_frame",
    "build_close",
    "unmask",
    "route",
    "RequestReader",
    "first_byte",
    "json_id",
    "jsonrpc_result",
    "complete_result",
    "json_member",
    "call_message",
    "traced_call_message",
    "result_shape",
    "array_length",
    "EXACT_PING",
    "EXACT_PONG",
    "PONG_FRAME",
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONTINUATION",
    "OP_EXACT_PING",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "ROUTE_CONNECT",
    "ROUTE_APP",
    "ROUTE_HEALTHZ",
    "ROUTE_MCP",
    "ROUTE_NOT_FOUND",
    "EXPECTS_CONTINUE",
    "KNOWN_INDEX",
    "KNOWN_NAMES",
    "READING_BODY",
    "READING_HEAD",
    "REFUSED",
    "STOPPED",
    "SHAPE_BAD",
    "SHAPE_CONTENT",
    "SHAPE_ERROR",
    "SHAPE_TYPED",
    "NOT_TEXT",
]
