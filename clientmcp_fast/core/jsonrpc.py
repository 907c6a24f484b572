"""JSON-RPC 2.0 as MCP uses it: decoding requests in one pass, and building answers from bytes.

Ids are kept as the exact JSON the agent sent (`msgspec.Raw`), so an answer or a
subscription tag carries the id with its JSON type unchanged (MCP.md §A.8).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from msgspec import UNSET

from clientmcp_fast.speedups import json_id

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
REQUEST_CANCELLED = -32800

NULL_ID = b"null"

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


# gc=False on the structs JSON is decoded into: decoded values never refer back to the struct
# holding them, so it can never be part of a reference cycle, and the garbage collector need
# not track it (cheaper to make and to free, on every request).
class Meta(msgspec.Struct, gc=False):
    """The members of `params._meta` the bridge reads (MCP.md §A); any others are skipped.

    A struct rather than a dict: its long keys are matched, not made into strings and hashed.
    """

    protocolVersion: Any = msgspec.field(default=msgspec.UNSET, name=META_VERSION)
    # Only its presence is checked: kept as the JSON it is, so no dict is built from it.
    clientCapabilities: msgspec.Raw | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name=META_CAPABILITIES
    )


class Params(msgspec.Struct, gc=False):
    """The members of `params` of every method the bridge serves; all optional, decoded once."""

    # Any JSON: an object is read as `Meta`; anything else is kept for the era checks to refuse.
    meta: Meta | str | int | float | bool | list | None = msgspec.field(default=msgspec.UNSET, name="_meta")
    name: Any = msgspec.UNSET
    arguments: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    cursor: Any = msgspec.UNSET
    protocolVersion: Any = msgspec.UNSET
    notifications: Any = msgspec.UNSET
    requestId: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class Message(msgspec.Struct, gc=False):
    """One JSON-RPC message: a request, a notification, or a response an agent posted."""

    jsonrpc: Any = msgspec.UNSET
    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    method: Any = msgspec.UNSET
    params: Params | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _IdOnly(msgspec.Struct, gc=False):
    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


decode_body = msgspec.json.Decoder(Message | list[msgspec.Raw]).decode
decode_message = msgspec.json.Decoder(Message).decode
decode_json = msgspec.json.Decoder().decode
_decode_id_only = msgspec.json.Decoder(_IdOnly).decode


def salvage_id(body: bytes | msgspec.Raw) -> bytes:
    """The id of a message whose shape is wrong, for its error answer; `null` when there is none."""
    try:
        found = _decode_id_only(body).id
    except msgspec.DecodeError:
        return NULL_ID
    return NULL_ID if found is UNSET else valid_id(found) or NULL_ID


def valid_id(raw: msgspec.Raw | msgspec.UnsetType) -> bytes | None:
    """The id as JSON bytes when it is a string or a number, as MCP requires; else None."""
    # msgspec keeps a Raw as the exact value: its first byte tells the JSON type.
    return None if raw is UNSET else json_id(raw)


def error(id_json: bytes, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"error":' + orjson.dumps(body) + b"}"


def notification(method: str, params: bytes | None = None) -> bytes:
    """A JSON-RPC notification; `params` is JSON already."""
    if params is None:
        return b'{"jsonrpc":"2.0","method":' + orjson.dumps(method) + b"}"
    return b'{"jsonrpc":"2.0","method":' + orjson.dumps(method) + b',"params":' + params + b"}"
