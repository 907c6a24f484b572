"""The client channel's JSON messages (ClientMCP v1 §3.2): typed decoding of what apps send, and what we send.

One reusable decoder reads every app message into `AppMessage`, whose members cover all
known types; members whose meaning depends on the type stay `msgspec.Raw` until the
type says how to read them, and a tool result is never decoded (its shape is checked by
`speedups.result_shape`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from clientmcp_fast.core.jsonrpc import copied, encode_json, loose_struct
from clientmcp_fast.speedups import json_member

# Types that only the bridge sends: an app sending one has a bug (docs/protocol.md, Close codes: 4400).
BRIDGE_TYPES = frozenset({"registered", "call", "cancel", "pong", "authorize"})

REGISTERED = b'{"type":"registered"}'


# gc=False: decoded JSON never refers back to the struct holding it, so no struct here can be
# part of a reference cycle and the collector need not track it (see core/jsonrpc.py).
class AppMessage(msgspec.Struct, gc=False):
    """Any message from an app, with the members of every type this bridge knows."""

    type: str
    # No member is decoded as `Any`: one of millions of small values would cost what building
    # those objects costs (see core/jsonrpc.py). An id that is not a string fails the decoding
    # at once, and `loose_app_message` reads the message again: its id is then None or NOT_TEXT.
    id: str | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    tools: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    instructions: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    consent: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET  # register: the app answers `authorize`
    allow: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET  # consent: the app's answer
    # The members of the extensions' messages are read by a second decoder of their own
    # (`decode_register_extensions`, `decode_progress`), so that a result, the message of
    # every call, is not a struct with more members to fill in and free.


class RegisterExtensions(msgspec.Struct, gc=False):
    """A register's members for the extensions of docs/protocol.md: `progress` (Progress), `trace` (Trace context)."""

    progress: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    trace: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class ProgressMessage(msgspec.Struct, gc=False):
    """A `progress` message's members (docs/protocol.md, Progress), each kept as sent until checked."""

    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    progress: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    total: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    message: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class ToolHead(msgspec.Struct, gc=False):
    """The members of a declared Tool the bridge validates; the rest passes through unread."""

    name: Any = msgspec.UNSET
    inputSchema: Any = msgspec.UNSET


decode_app_message = msgspec.json.Decoder(AppMessage).decode
# The type stays a string: a message without one, or with another, is refused as before.
_decode_loose_app_message = msgspec.json.Decoder(
    loose_struct(AppMessage, "_LooseAppMessage", type=str)
).decode
decode_raw_list = msgspec.json.Decoder(list[msgspec.Raw]).decode
decode_register_extensions = msgspec.json.Decoder(RegisterExtensions).decode
decode_progress = msgspec.json.Decoder(ProgressMessage).decode
decode_tool_head = msgspec.json.Decoder(ToolHead).decode


def loose_app_message(data: bytes) -> AppMessage:
    """An app's message that `decode_app_message` refused, read with its id kept as JSON.

    Raises msgspec.ValidationError when it is wrong in another way, as `decode_app_message` would.
    """
    message = copied(AppMessage, _decode_loose_app_message(data))
    message.id = json_member(message.id)
    return message


def cancel_message(call_id: bytes) -> bytes:
    """A `cancel` for the app: the call's result is no longer wanted."""
    return b'{"type":"cancel","id":"' + call_id + b'"}'


def authorize_message(request_id: str, client_name: str | None, client_uri: str, code: str) -> bytes:
    """An `authorize` for an app that declared `consent` (docs/protocol.md, Consent): who asks, and the code."""
    client: dict[str, str] = {"uri": client_uri}
    if client_name is not None:
        client = {"name": client_name, "uri": client_uri}
    return encode_json({"type": "authorize", "id": request_id, "client": client, "code": code})
