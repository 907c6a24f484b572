"""The JSON-RPC envelope (`core.jsonrpc`): any body, decoded as the agent endpoint decodes it.

As there, only a UTF-8 body is read (RFC 8259 §8.1: the endpoint refuses any other first).

A failure is an exception other than those `decode_body` documents (msgspec's
DecodeError or ValidationError, RecursionError, TooManyElements), from `decode_message`
on a batch element other than ValidationError, or from anything else here; a batch of
over 1,000 elements; a member read with another type than the checks expect; an id that
is not JSON; with the compiled twin live, any disagreement of the twins' JSON walkers.
"""

from __future__ import annotations

import msgspec
import orjson
from msgspec import UNSET

from clientmcp_fast import speedups
from clientmcp_fast._pure import splice as pure
from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.limits import MAX_BATCH_ELEMENTS
from clientmcp_fast.core.websocket import valid_utf8

DOCUMENTED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, jsonrpc.TooManyElements)
TEXT = (str, type(None), type(speedups.NOT_TEXT), type(UNSET))  # what a member read as a string holds


def check_id(id_json: bytes) -> None:
    """An id as answers carry it: JSON null, a string or a number."""
    value = orjson.loads(id_json)
    assert value is None or type(value) in (str, int, float), id_json


def check_message(message: jsonrpc.Message) -> None:
    """The members the checks read have the types they expect."""
    assert isinstance(message.jsonrpc, TEXT) and isinstance(message.method, TEXT)
    params = message.params
    assert type(params) is jsonrpc.Params and isinstance(params.name, TEXT)
    meta = params.meta
    assert meta is UNSET or meta is None or type(meta) is jsonrpc.Meta
    if type(meta) is jsonrpc.Meta:
        assert isinstance(meta.protocolVersion, TEXT)
    id_json = jsonrpc.valid_id(message.id)
    if id_json is not None:
        check_id(id_json)
    assert jsonrpc.wants_tool_changes(params.notifications) in (True, False)
    for member in (params.cursor, params.protocolVersion, params.requestId):
        assert isinstance(speedups.json_member(member), TEXT)


def TestOneInput(data: bytes) -> None:
    if not valid_utf8(data):
        return
    check_id(jsonrpc.salvage_id(data))  # what a wrong shape is answered with
    try:
        decoded = jsonrpc.decode_body(data)
    except DOCUMENTED:
        decoded = None
    if type(decoded) is list:
        assert len(decoded) <= MAX_BATCH_ELEMENTS
        for element in decoded:
            try:
                check_message(jsonrpc.decode_message(element))
            except msgspec.ValidationError:
                check_id(jsonrpc.salvage_id(element))
    elif decoded is not None:
        check_message(decoded)
    if speedups.IMPLEMENTATION == "compiled" and decoded is not None:
        # The walkers are defined for JSON that msgspec has read: the body, here.
        for walk in ("array_length", "result_shape", "json_id", "json_member", "first_byte"):
            args = (data, MAX_BATCH_ELEMENTS) if walk == "array_length" else (data,)
            assert getattr(pure, walk)(*args) == getattr(speedups, walk)(*args), walk
