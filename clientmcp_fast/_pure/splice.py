"""JSON bytes passed through, spliced into messages; the pure-Python twin of `_speedups/splice.pyx`.

What an agent or an app sent as JSON (an id, arguments, a result) is forwarded as the
same bytes, never decoded and encoded again; a result's shape is checked without
decoding it either. Each argument is bytes or any other buffer (a `msgspec.Raw`).
"""

from __future__ import annotations

from typing import Any

import msgspec

# The fixed pieces of the messages: one definition serves both twins.
RESULT_HEAD = b'{"jsonrpc":"2.0","id":'
RESULT_MIDDLE = b',"result":'
COMPLETE_OPEN = b'{"resultType":"complete",'
CALL_HEAD = b'{"type":"call","id":"'
CALL_NAME = b'","name":"'
CALL_ARGUMENTS = b'","arguments":'
TRACEPARENT_MEMBER = b',"traceparent":"'
TRACESTATE_MEMBER = b'","tracestate":'


class _NotText:
    """What `json_member` gives for a value that is neither a string nor null: equal to no text."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_TEXT"


NOT_TEXT = _NotText()

# What `result_shape` finds.
SHAPE_BAD = 0  # not an object with a content array
SHAPE_CONTENT = 1  # an object with a content array
SHAPE_TYPED = 2  # the same, with a resultType member (docs/protocol.md, Mapping)
SHAPE_ERROR = 4  # added to either: its isError is true, a tool error from the app (counted as such)


def first_byte(json: bytes) -> int:
    """The first byte of some JSON (it tells the value's type), or -1 if there is none."""
    view = memoryview(json)
    return view[0] if len(view) else -1


def json_id(raw: bytes) -> bytes | None:
    """A JSON-RPC id as bytes when it is a string or a number, as MCP requires; else None."""
    data = bytes(raw)
    if not data:
        return None
    first = data[0]
    return data if first == 0x22 or 0x30 <= first <= 0x39 or first == 0x2D else None


_decode_text = msgspec.json.Decoder(str).decode


def json_member(raw: Any) -> Any:
    """A member kept as Raw, as the checks read it: its text if a string, None if null, else NOT_TEXT.

    `msgspec.UNSET` (the member is absent) is given back as it is. The JSON is a value
    msgspec has read from valid UTF-8; only a string is decoded, so a huge array costs nothing.
    """
    if raw is msgspec.UNSET:
        return raw
    first = first_byte(raw)
    if first == 0x22:  # '"'
        return _decode_text(raw)
    return None if first == 0x6E else NOT_TEXT  # "n": null is the only JSON value starting so


def jsonrpc_result(id_json: bytes, result: bytes) -> bytes:
    """A JSON-RPC response around a result that is JSON already."""
    return b"".join((RESULT_HEAD, id_json, RESULT_MIDDLE, result, b"}"))


def complete_result(id_json: bytes, result: bytes) -> bytes:
    """A 2026-07-28 JSON-RPC response around `result`, `"resultType":"complete"` put first in it.

    For an object result that has members and no resultType (what `result_shape` calls
    SHAPE_CONTENT); a value that does not start with "{" raises ValueError.
    """
    view = memoryview(result)
    if not len(view) or view[0] != 0x7B:  # "{"
        raise ValueError("the JSON does not start with '{'")
    return b"".join((RESULT_HEAD, id_json, RESULT_MIDDLE, COMPLETE_OPEN, view[1:], b"}"))


def call_message(call_id: bytes, name: bytes, arguments: bytes) -> bytes:
    """A `call` for the app; `call_id` and `name` (a registered tool name) never need escaping."""
    return b"".join((CALL_HEAD, call_id, CALL_NAME, name, CALL_ARGUMENTS, arguments, b"}"))


def traced_call_message(
    call_id: bytes, name: bytes, arguments: bytes, traceparent: bytes, tracestate: bytes
) -> bytes:
    """A `call` with the trace context members (docs/protocol.md, Trace context).

    `traceparent` is a checked one (hex and dashes: nothing to escape); `tracestate` a JSON
    string, or b"" for none.
    """
    close = (TRACESTATE_MEMBER, tracestate, b"}") if tracestate else (b'"}',)
    return b"".join(
        (
            CALL_HEAD,
            call_id,
            CALL_NAME,
            name,
            CALL_ARGUMENTS,
            arguments,
            TRACEPARENT_MEMBER,
            traceparent,
            *close,
        )
    )


class _ResultShape(msgspec.Struct, gc=False):
    """The members of a CallToolResult the bridge looks at; the rest is skipped."""

    content: msgspec.Raw
    resultType: Any = msgspec.UNSET
    isError: msgspec.Raw = msgspec.Raw(b"false")


_decode_result_shape = msgspec.json.Decoder(_ResultShape).decode


def result_shape(result: bytes) -> int:
    """What the JSON `result` (a value msgspec has read) is: an object with a content array, typed, an error.

    SHAPE_BAD, or SHAPE_CONTENT or SHAPE_TYPED with SHAPE_ERROR added when isError is true.
    """
    try:
        shape = _decode_result_shape(result)
    except (msgspec.DecodeError, RecursionError):
        return SHAPE_BAD
    if first_byte(shape.content) != 0x5B:  # "["
        return SHAPE_BAD
    error = SHAPE_ERROR if bytes(shape.isError) == b"true" else 0
    return (SHAPE_CONTENT if shape.resultType is msgspec.UNSET else SHAPE_TYPED) + error


_decode_elements = msgspec.json.Decoder(list[msgspec.Raw]).decode


def array_length(text: bytes, limit: int) -> int:
    """How many elements the JSON array `text` has, counted no further than limit + 1; -1 if it is not an array.

    For a batch's elements to be counted before any is made. Defined for JSON text; for
    other bytes the count means nothing (the compiled twin never reads past them). This
    twin counts by decoding the elements, so it costs what decoding them does.
    """
    if text.lstrip(b" \t\r\n")[:1] != b"[":
        return -1
    try:
        return min(len(_decode_elements(text)), limit + 1)
    except (msgspec.DecodeError, RecursionError):
        return 0
