"""Decoding what agents and apps send: no member is built into objects whatever it holds.

Decoded as `Any`, a member holding millions of small values would be built into that many
Python objects, at the event loop's expense. A message is decoded as it should be; one with
a member of another type fails that at once and is read again with such members kept as
JSON (`msgspec.Raw`), which is only skipped: a member that was not a string then holds None
(JSON null) or NOT_TEXT, and the checks answer as they would for any other wrong type.
"""

from __future__ import annotations

import msgspec
import pytest

from clientmcp_fast.core.jsonrpc import (
    META_CAPABILITIES,
    META_VERSION,
    Message,
    Meta,
    Params,
    TooManyElements,
    decode_body,
    decode_message,
    salvage_id,
    wants_tool_changes,
)
from clientmcp_fast.core.messages import decode_app_message, loose_app_message
from clientmcp_fast.speedups import NOT_TEXT

# Many small values: what a member must never be built from.
MANY = b"[" + b",".join([b"[]"] * 10_000) + b"]"
VERSION_KEY, CAPABILITIES_KEY = META_VERSION.encode(), META_CAPABILITIES.encode()


def _raw(json: bytes) -> msgspec.Raw:
    return msgspec.json.decode(b"[" + json + b"]", type=list[msgspec.Raw])[0]


def _body(jsonrpc=b'"2.0"', method=b'"tools/call"', name=b'"echo"', meta=None, **more: bytes) -> bytes:
    params = b'"name":%s' % name + (b',"_meta":%s' % meta if meta is not None else b"")
    params += b"".join(b',"%s":%s' % (key.encode(), value) for key, value in more.items())
    return b'{"jsonrpc":%s,"id":1,"method":%s,"params":{%s}}' % (jsonrpc, method, params)


@pytest.mark.parametrize("decode", [decode_body, decode_message], ids=["body", "batch element"])
def test_a_well_formed_request_reads_its_strings(decode):
    message = decode(_body(meta=b'{"%s":"2026-07-28","%s":{}}' % (VERSION_KEY, CAPABILITIES_KEY)))
    assert type(message) is Message
    assert (message.jsonrpc, message.method, message.params.name) == ("2.0", "tools/call", "echo")
    assert type(message.params.meta) is Meta
    assert message.params.meta.protocolVersion == "2026-07-28"
    assert bytes(message.params.meta.clientCapabilities) == b"{}"


@pytest.mark.parametrize("decode", [decode_body, decode_message], ids=["body", "batch element"])
@pytest.mark.parametrize(
    ("json", "read"), [(MANY, NOT_TEXT), (b"5", NOT_TEXT), (b"null", None), (b"{}", NOT_TEXT)]
)
def test_members_of_another_type_are_read_as_null_or_not_text(decode, json, read):
    for member in ("jsonrpc", "method", "name"):
        message = decode(_body(**{member: json}))
        got = message.params.name if member == "name" else getattr(message, member)
        assert got is read, member
    # The members read as strings are still read, and what passes through is still JSON.
    message = decode(_body(name=json, arguments=b'{"a":1}'))
    assert (message.jsonrpc, message.method) == ("2.0", "tools/call")
    assert bytes(message.params.arguments) == b'{"a":1}'


@pytest.mark.parametrize(
    ("meta", "version"),
    [
        (b'{"%s":%s}' % (VERSION_KEY, MANY), NOT_TEXT),
        (b'{"%s":null,"%s":%s}' % (VERSION_KEY, CAPABILITIES_KEY, MANY), None),
        (b'{"other":%s,"%s":"2026-07-28"}' % (MANY, VERSION_KEY), "2026-07-28"),
    ],
)
def test_meta_of_an_object_is_read_whatever_its_members_hold(meta, version):
    found = decode_body(_body(meta=meta, name=MANY)).params.meta
    assert type(found) is Meta
    assert found.protocolVersion == version and type(found.protocolVersion) is type(version)


@pytest.mark.parametrize("meta", [b"null", b"5", b'"2026-07-28"', b"true", b"[]", MANY])
def test_meta_that_is_not_an_object_is_none(meta):
    assert decode_body(_body(meta=meta)).params.meta is None


def test_the_members_read_by_few_methods_stay_json():
    params = decode_body(_body(cursor=MANY, protocolVersion=MANY, notifications=MANY, requestId=MANY)).params
    for value in (params.cursor, params.protocolVersion, params.notifications, params.requestId):
        assert type(value) is msgspec.Raw
        assert bytes(value) == MANY


@pytest.mark.parametrize(
    "body",
    [b"5", b'"x"', b"null", b'{"jsonrpc":"2.0","id":1,"method":"m","params":5}', b'{"params":%s}' % MANY],
)
def test_a_wrong_shape_is_still_a_validation_error(body):
    with pytest.raises(msgspec.ValidationError):
        decode_body(body)


def test_an_app_result_with_an_id_of_another_type_is_read_again():
    data = b'{"type":"result","id":%s,"result":{"content":[]},"instructions":%s}' % (MANY, MANY)
    with pytest.raises(msgspec.ValidationError):
        decode_app_message(data)
    message = loose_app_message(data)
    assert (message.type, message.id) == ("result", NOT_TEXT)
    assert bytes(message.result) == b'{"content":[]}' and bytes(message.instructions) == MANY
    with pytest.raises(msgspec.ValidationError):
        loose_app_message(b'{"type":5,"id":"1"}')  # wrong in another way: refused as before
    with pytest.raises(msgspec.ValidationError, match="missing required field `type`"):
        loose_app_message(b'{"id":[1]}')


@pytest.mark.parametrize("jsonrpc", [b'"2.0"', b"[1]"], ids=["well-formed", "read again"])
def test_absent_params_are_empty_params(jsonrpc):
    message = decode_body(b'{"jsonrpc":%s,"id":1,"method":"ping"}' % jsonrpc)
    assert message.params == Params()


@pytest.mark.parametrize(
    ("json", "wanted"),
    [
        (b'{"toolsListChanged":true}', True),
        (b'{"other":1, "toolsListChanged" : true }', True),
        (b'{"toolsListChanged":false}', False),
        (b'{"toolsListChanged":"true"}', False),
        (b'{"toolsListChanged":1}', False),
        (b"{}", False),
        (b"true", False),
        (b"[true]", False),
        (b"null", False),
    ],
)
def test_wants_tool_changes_only_for_toolslistchanged_true(json, wanted):
    assert wants_tool_changes(_raw(json)) is wanted
    assert wants_tool_changes(msgspec.UNSET) is False


# -- a batch is counted before its elements are decoded ---------------------------------------------


def test_a_batch_of_over_a_thousand_elements_is_refused_before_any_element_is_made(monkeypatch):
    from clientmcp_fast.core import jsonrpc

    def refuse(body):
        raise AssertionError("the elements were decoded")

    monkeypatch.setattr(jsonrpc, "_decode_body", refuse)
    with pytest.raises(TooManyElements):
        decode_body(b"[" + b",".join([b"[]"] * 1_000_000) + b"]")
    with pytest.raises(TooManyElements):
        decode_body(b' [ {"a":[1,2]}' + b", {}" * 1000 + b"] ")


def test_a_batch_of_a_thousand_elements_is_decoded():
    elements = decode_body(b"[" + b",".join([b'{"jsonrpc":"2.0","id":1,"method":"ping"}'] * 1000) + b"]")
    assert isinstance(elements, list) and len(elements) == 1000


def test_a_body_that_is_not_json_is_a_parse_error_whatever_its_elements_count():
    with pytest.raises(msgspec.DecodeError):
        decode_body(b"[" + b"1," * 2000 + b"]")  # a trailing comma
    with pytest.raises(msgspec.DecodeError):
        decode_body(b"[" + b"1," * 2000)  # truncated
    with pytest.raises(RecursionError):
        decode_body(b"[" + b"[]," * 2000 + b"[" * 10_000 + b"]" * 10_001)


def test_the_id_of_a_wrong_shape_nested_too_deeply_after_it_is_null():
    """`params` not an object stops the decoding before the nesting, which salvaging the id then meets."""
    body = b'{"id":7,"params":1,"x":' + b"[" * 1200 + b"]" * 1200 + b"}"
    with pytest.raises(msgspec.ValidationError):
        decode_body(body)
    assert salvage_id(body) == b"null"
    assert salvage_id(b'{"id":7,"params":1,"x":' + b"[" * 1200) == b"null"  # truncated, too
    assert salvage_id(b'{"id":7,"params":1,"x":[[]]}') == b"7"
