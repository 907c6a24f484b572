"""JSON-RPC 2.0 as MCP uses it: decoding requests in one pass, and building answers from bytes.

Ids are kept as the exact JSON the agent sent (`msgspec.Raw`), so an answer or a
subscription tag carries the id with its JSON type unchanged (MCP 2026-07-28, subscriptions).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from clientmcp_fast.core.limits import MAX_BATCH_ELEMENTS
from clientmcp_fast.speedups import array_length, first_byte, json_id, json_member

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
#
# No member is decoded as `Any`: a member of millions of small values would cost the event
# loop what building those objects costs. A request is decoded as it should be (the members
# the bridge reads as strings, the others kept as the JSON they are, `msgspec.Raw`); one
# that is not (a member of another type) fails that at once, and is decoded again with every
# such member kept as JSON, then read by `speedups.json_member`: after `decode_body`, a
# member that was not a string holds None (JSON null) or NOT_TEXT (any other JSON).
class Meta(msgspec.Struct, gc=False):
    """The members of `params._meta` the bridge reads (MCP 2026-07-28, basic/index); any others are skipped.

    A struct rather than a dict: its long keys are matched, not made into strings and hashed.
    """

    protocolVersion: str | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name=META_VERSION)
    # Only its presence is checked.
    clientCapabilities: msgspec.Raw | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name=META_CAPABILITIES
    )
    # tools/call: asks for notifications/progress (docs/protocol.md, Progress); a string or a number.
    progressToken: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    # tools/call: W3C trace context, as the SDKs put it in _meta (docs/protocol.md, Trace context).
    traceparent: str | msgspec.UnsetType = msgspec.UNSET
    tracestate: str | msgspec.UnsetType = msgspec.UNSET


class Params(msgspec.Struct, gc=False):
    """The members of `params` of every method the bridge serves; all optional, decoded once."""

    # After decode_body: a Meta, UNSET, or None when _meta is not an object.
    meta: Meta | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name="_meta")
    name: str | msgspec.UnsetType = msgspec.UNSET
    arguments: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    # Read by the few methods that use them, with `json_member`.
    cursor: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    protocolVersion: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    notifications: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    requestId: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class Message(msgspec.Struct, gc=False):
    """One JSON-RPC message: a request, a notification, or a response an agent posted."""

    jsonrpc: str | msgspec.UnsetType = msgspec.UNSET
    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    # Absent, an empty Params: no method tells "no params" from "params": {}.
    params: Params = msgspec.field(default_factory=Params)
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


def loose_struct(struct: type[msgspec.Struct], name: str, **kept: Any) -> Any:
    """`struct` with every member kept as JSON (`msgspec.Raw`), but those `kept` with the type given.

    Members keep their JSON names, and required members stay required.
    """
    members = []
    for field in msgspec.structs.fields(struct):
        if field.required:
            kind, spec = msgspec.Raw, msgspec.field(name=field.encode_name)
        else:
            kind, spec = msgspec.Raw | msgspec.UnsetType, msgspec.field(default=UNSET, name=field.encode_name)
        members.append((field.name, kept.get(field.name, kind), spec))
    return msgspec.defstruct(name, members, gc=False)


def copied(struct: type[msgspec.Struct], source: Any) -> Any:
    """A `struct` holding the members of `source`, a struct with the same member names."""
    return struct(**{field: getattr(source, field) for field in struct.__struct_fields__})


_LooseMeta = loose_struct(Meta, "_LooseMeta")
_LooseMessage = loose_struct(
    Message, "_LooseMessage", params=loose_struct(Params, "_LooseParams") | msgspec.UnsetType
)


class Notifications(msgspec.Struct, gc=False):
    """The member of a subscriptions/listen's `params.notifications` the bridge reads."""

    toolsListChanged: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _IdOnly(msgspec.Struct, gc=False):
    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class TooManyElements(Exception):
    """A batch of more than MAX_BATCH_ELEMENTS elements: counted, none of them decoded."""


_decode_body = msgspec.json.Decoder(Message | list[msgspec.Raw]).decode
_check_json = msgspec.json.Decoder(msgspec.Raw).decode
_decode_loose_body = msgspec.json.Decoder(_LooseMessage | list[msgspec.Raw]).decode
_decode_message = msgspec.json.Decoder(Message).decode
_decode_loose_message = msgspec.json.Decoder(_LooseMessage).decode
_decode_loose_meta = msgspec.json.Decoder(_LooseMeta).decode
decode_json = msgspec.json.Decoder().decode
encode_json = msgspec.json.Encoder().encode
_decode_notifications = msgspec.json.Decoder(Notifications).decode
_decode_id_only = msgspec.json.Decoder(_IdOnly).decode


def decode_body(body: bytes) -> Message | list[msgspec.Raw]:
    """An agent's body: one message, or a batch's elements as JSON.

    Raises msgspec.DecodeError (not JSON), msgspec.ValidationError (a scalar, or params that
    is not an object), RecursionError (nested too deeply) or TooManyElements.
    """
    # A batch's elements are counted before any is made: a million of them would cost the
    # event loop what making a million objects costs. Checking that the body is JSON costs
    # no object, and a body that is not JSON is refused as such, whatever it counts. (A body
    # starting with "{", the usual one, is not an array: no call is made to walk it.)
    if body and body[0] != 0x7B and array_length(body, MAX_BATCH_ELEMENTS) > MAX_BATCH_ELEMENTS:
        _check_json(body)
        raise TooManyElements
    try:
        return _decode_body(body)
    except msgspec.ValidationError:
        loose = _decode_loose_body(body)
        return loose if type(loose) is list else _tightened(loose)


def decode_message(raw: bytes | msgspec.Raw) -> Message:
    """One element of a batch, read as `decode_body` reads a message."""
    try:
        return _decode_message(raw)
    except msgspec.ValidationError:
        return _tightened(_decode_loose_message(raw))


def _tightened(loose: _LooseMessage) -> Message:
    """A message whose members were kept as JSON, with those the bridge reads as strings read."""
    params = loose.params
    if params is UNSET:
        params = Params()
    else:
        meta = params.meta
        if meta is not UNSET:
            if first_byte(meta) == 0x7B:  # "{"
                members = _decode_loose_meta(meta)
                meta = Meta(
                    protocolVersion=json_member(members.protocolVersion),
                    clientCapabilities=members.clientCapabilities,
                    progressToken=members.progressToken,
                    traceparent=json_member(members.traceparent),
                    tracestate=json_member(members.tracestate),
                )
            else:
                meta = None
        # Every other member is JSON in both: only those read as strings (and _meta) change.
        params = copied(Params, params)
        params.meta = meta
        params.name = json_member(params.name)
    message = copied(Message, loose)
    message.jsonrpc = json_member(loose.jsonrpc)
    message.method = json_member(loose.method)
    message.params = params
    return message


def wants_tool_changes(raw: msgspec.Raw | msgspec.UnsetType) -> bool:
    """Whether a subscriptions/listen's `notifications` is an object whose toolsListChanged is true."""
    if raw is UNSET or first_byte(raw) != 0x7B:  # "{"
        return False
    flag = _decode_notifications(raw).toolsListChanged
    return flag is not UNSET and bytes(flag) == b"true"


def salvage_id(body: bytes | msgspec.Raw) -> bytes:
    """The id of a message whose shape is wrong, for its error answer; `null` when there is none."""
    try:
        found = _decode_id_only(body).id
    except (msgspec.DecodeError, RecursionError):
        # A wrong shape can stop decode_body before a member nested too deeply, which skipping
        # the members around the id still meets: then there is no id to be had.
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
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"error":' + encode_json(body) + b"}"


def notification(method: str, params: bytes | None = None) -> bytes:
    """A JSON-RPC notification; `params` is JSON already."""
    if params is None:
        return b'{"jsonrpc":"2.0","method":' + encode_json(method) + b"}"
    return b'{"jsonrpc":"2.0","method":' + encode_json(method) + b',"params":' + params + b"}"
