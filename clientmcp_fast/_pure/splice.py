"""JSON bytes passed through, spliced into messages; the pure-Python twin of `_speedups/splice.pyx`.

What an agent or an app sent as JSON (an id, arguments, a result) is forwarded as the
same bytes, never decoded and encoded again. Each argument is bytes or any other buffer
(a `msgspec.Raw`).
"""

from __future__ import annotations

# The fixed pieces of the messages: one definition serves both twins.
RESULT_HEAD = b'{"jsonrpc":"2.0","id":'
RESULT_MIDDLE = b',"result":'
CALL_HEAD = b'{"type":"call","id":"'
CALL_NAME = b'","name":"'
CALL_ARGUMENTS = b'","arguments":'


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


def jsonrpc_result(id_json: bytes, result: bytes) -> bytes:
    """A JSON-RPC response around a result that is JSON already."""
    return b"".join((RESULT_HEAD, id_json, RESULT_MIDDLE, result, b"}"))


def call_message(call_id: bytes, name: bytes, arguments: bytes) -> bytes:
    """A `call` for the app; `call_id` and `name` (a registered tool name) never need escaping."""
    return b"".join((CALL_HEAD, call_id, CALL_NAME, name, CALL_ARGUMENTS, arguments, b"}"))
