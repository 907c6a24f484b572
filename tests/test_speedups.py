"""The compiled `_speedups` and their pure twins behave identically, and the right one is live."""

from __future__ import annotations

import ast
import ctypes
import importlib
import json
import os
import random
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import msgspec
import pytest
from wire import client_frame, mask_payload

import clientmcp_fast
from clientmcp_fast import speedups
from clientmcp_fast._pure import frames as pure_frames

# Imported directly, never skipped: `make test` builds the extensions, and a missing build must fail.
from clientmcp_fast._pure import http_reader as pure_http_reader  # noqa: E402
from clientmcp_fast._pure import routing as pure_routing
from clientmcp_fast._pure import splice as pure_splice
from clientmcp_fast._pure.errors import FrameError
from clientmcp_fast._speedups import frames as compiled_frames  # noqa: E402
from clientmcp_fast._speedups import http_reader as compiled_http_reader  # noqa: E402
from clientmcp_fast._speedups import routing as compiled_routing  # noqa: E402
from clientmcp_fast._speedups import splice as compiled_splice  # noqa: E402
from clientmcp_fast.core.http import KNOWN_NAMES, MCP_SESSION_ID, Request

MAX = 4 * 1024 * 1024
TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_live_implementation_is_the_one_asked_for():
    if os.environ.get("CLIENTMCP_NO_EXTENSIONS"):
        assert speedups.IMPLEMENTATION == "pure"
        assert speedups.FrameReader is pure_frames.FrameReader
        assert speedups.RequestReader is pure_http_reader.RequestReader
        assert speedups.json_id is pure_splice.json_id
    else:
        # The compiled modules imported above exist, so nothing may have fallen back silently.
        assert speedups.IMPLEMENTATION == "compiled"
        assert speedups.FrameReader is compiled_frames.FrameReader
        assert speedups.RequestReader is compiled_http_reader.RequestReader
        assert speedups.json_id is compiled_splice.json_id


def test_typed_modules_are_compiled_or_interpreted_as_asked():
    pure = bool(os.environ.get("CLIENTMCP_NO_EXTENSIONS"))
    for name in speedups.TYPED_MODULES:
        module = importlib.import_module(name)
        built = Path(module.__file__)
        assert built.suffix == ".py" if pure else module.__file__.endswith(tuple(EXTENSION_SUFFIXES)), built
    # A .py edited since the build would not be what runs: importing the package refuses it
    # (tests/test_compiled.py), and `make test` rebuilds first.
    assert clientmcp_fast.stale_extensions() == []


def test_version_names_the_build_that_runs():
    # `clientmcp --version` is how a frozen build proves its extensions are live (tests/container).
    expected = "pure" if os.environ.get("CLIENTMCP_NO_EXTENSIONS") else "compiled"
    assert speedups.build() == expected
    done = subprocess.run(
        [sys.executable, "-m", "clientmcp_fast", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout == f"clientmcp {clientmcp_fast.__version__} ({expected})\n"


def _client_frame(rnd: random.Random, opcode: int, payload: bytes, fin=True, masked=True, rsv=0) -> bytes:
    """A client frame masked with a key drawn from `rnd`, or unmasked."""
    return client_frame(opcode, payload, fin=fin, rsv=rsv, mask=rnd.randbytes(4) if masked else None)


def _random_stream(rnd: random.Random) -> bytes:
    stream = b""
    for _ in range(rnd.randint(1, 5)):
        kind = rnd.random()
        if kind < 0.1:
            stream += _client_frame(rnd, 1, b'{"type":"ping"}')
        elif kind < 0.15:
            stream += _client_frame(rnd, rnd.choice([3, 11, 0]), b"x", fin=rnd.random() < 0.5)
        elif kind < 0.2:
            stream += _client_frame(rnd, 1, b"a", masked=False)
        elif kind < 0.25:
            stream += _client_frame(rnd, 9, rnd.randbytes(rnd.choice([0, 125, 126])))
        else:
            size = (
                rnd.choice([0, 1, 7, 8, 9, 15, 125, 126, 127, 65535, 65536])
                if rnd.random() < 0.3
                else rnd.randint(0, 300)
            )
            stream += _client_frame(
                rnd,
                rnd.choice([0, 1, 2, 8, 9, 10]),
                rnd.randbytes(size),
                fin=rnd.random() < 0.8,
                rsv=0x40 if rnd.random() < 0.03 else 0,
            )
    return stream


def _frames_or_error(module, chunks: list[bytes]) -> list:
    reader = module.FrameReader(MAX)
    out: list = []
    try:
        for chunk in chunks:
            out += reader.feed(chunk)
    except FrameError as error:
        out += error.frames
        out.append(("error", error.code, error.reason))
    return out


def test_frame_reader_twins_agree_on_random_streams_in_random_chunks():
    rnd = random.Random(20261130)
    for _ in range(2000):
        stream = _random_stream(rnd)
        cuts = sorted(rnd.sample(range(1, len(stream)), min(len(stream) - 1, rnd.randint(0, 6))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
        assert _frames_or_error(pure_frames, chunks) == _frames_or_error(compiled_frames, chunks)


def test_frame_reader_twins_agree_byte_at_a_time():
    rnd = random.Random(7)
    for _ in range(100):
        stream = _random_stream(rnd)
        chunks = [stream[i : i + 1] for i in range(len(stream))]
        assert _frames_or_error(pure_frames, chunks) == _frames_or_error(compiled_frames, chunks)


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 125, 126, 65535, 65536, 100_000])
def test_build_and_unmask_twins_agree(size):
    rnd = random.Random(size)
    payload, key = rnd.randbytes(size), rnd.randbytes(4)
    for opcode in (1, 2, 9, 10):
        assert pure_frames.build_frame(opcode, payload) == compiled_frames.build_frame(opcode, payload)
    expected = mask_payload(payload, key)
    assert pure_frames.unmask(payload, key) == compiled_frames.unmask(payload, key) == expected
    assert pure_frames.build_close(4409, b"replaced") == compiled_frames.build_close(4409, b"replaced")


@pytest.mark.parametrize(
    "target",
    [
        b"/mcp",
        b"/mcp/",
        b"/mcp/abc.def",
        b"/mcp/a/b",
        b"/mcp?x=1",
        b"/mcp/tok?x=1",
        b"/connect",
        b"/connect?a",
        b"/healthz",
        b"/_echo",
        b"/",
        b"",
        b"/mcpx",
        b"/healthz/",
        b"/CONNECT",
        b"http://127.0.0.1:8080/mcp",
        b"HTTPS://bridge.example.com/mcp/tok?x=1",
        b"http://host?/mcp",
        b"http://host",
        b"ftp://host/mcp",
        b"*",
        b"mcp",
        b"/apps/x/mcp",
        b"/apps/app-1/mcp?x=1",
        b"/apps//mcp",
        b"/apps/mcp",
        b"/apps/a/b/mcp",
        b"/apps/x/mcpx",
        b"/apps/x/mcp/",
        b"/apps/x",
        b"/apps",
        b"http://h/apps/x/mcp",
    ],
)
def test_routing_twins_agree(target):
    assert pure_routing.route(target) == compiled_routing.route(target)


@pytest.mark.parametrize(
    "target, expected",
    [
        (b"http://127.0.0.1:8080/mcp", (pure_routing.ROUTE_MCP, b"")),
        (b"https://bridge.example.com/mcp/tok?x=1", (pure_routing.ROUTE_MCP, b"tok")),
        (b"HTTP://h/connect", (pure_routing.ROUTE_CONNECT, b"")),
        (b"http://h:1/healthz?probe", (pure_routing.ROUTE_HEALTHZ, b"")),
        (b"http://host?q=/mcp", (pure_routing.ROUTE_NOT_FOUND, b"")),  # the path is "/", the rest a query
        (b"http://host", (pure_routing.ROUTE_NOT_FOUND, b"")),
        (b"ftp://host/mcp", (pure_routing.ROUTE_NOT_FOUND, b"")),
        (b"http://h/apps/app-1/mcp?x", (pure_routing.ROUTE_APP, b"app-1")),
    ],
)
def test_an_absolute_form_target_routes_by_its_path(target, expected):
    """RFC 9112 §3.2.2: `POST http://host/mcp HTTP/1.1` is served as `POST /mcp`."""
    assert pure_routing.route(target) == compiled_routing.route(target) == expected


@pytest.mark.parametrize(
    "target, expected",
    [
        (b"/apps/app-1/mcp", b"app-1"),
        (b"/apps/a.b@c:d/mcp?q=1", b"a.b@c:d"),
        (b"/apps//mcp", None),
        (b"/apps/mcp", None),
        (b"/apps/a/b/mcp", None),
        (b"/apps/a/mcp/", None),
    ],
)
def test_an_apps_resource_routes_with_its_client_id(target, expected):
    """`/apps/<id>/mcp` names one app's resource (docs/oauth.md); any other shape is not found."""
    found = (pure_routing.ROUTE_APP, expected) if expected else (pure_routing.ROUTE_NOT_FOUND, b"")
    assert pure_routing.route(target) == compiled_routing.route(target) == found


# -- splicing JSON bytes into messages ----------------------------------------------------------

_JSON_VALUES = [
    b'"a"', b'"\\u00e9 \\" x"', b"0", b"-1", b"1.5e3", b"12345678901234567890", b"true", b"false",
    b"null", b"{}", b'{"a":[1,{"b":null}]}', b"[]", b"[1,2]", "\"é\"".encode(), b"",
]  # fmt: skip


def _as_raw(data: bytes):
    # Raw as msgspec makes it (a view of the decoded document), and plain bytes.
    return msgspec.json.decode(b"[" + data + b"]", type=list[msgspec.Raw])[0] if data else msgspec.Raw(b"")


@pytest.mark.parametrize("value", _JSON_VALUES)
def test_splice_twins_agree(value):
    for given in (value, _as_raw(value)):
        for name in ("first_byte", "json_id"):
            assert getattr(pure_splice, name)(given) == getattr(compiled_splice, name)(given)
        assert pure_splice.jsonrpc_result(b"7", given) == compiled_splice.jsonrpc_result(b"7", given)
        if value.startswith(b"{"):
            assert pure_splice.complete_result(b"7", given) == compiled_splice.complete_result(b"7", given)
        else:
            for twin in (pure_splice, compiled_splice):
                with pytest.raises(ValueError, match="does not start with '{'"):
                    twin.complete_result(b"7", given)
        assert pure_splice.call_message(b"12", b"echo", given) == compiled_splice.call_message(
            b"12", b"echo", given
        )
        for state in (b"", b'"a=say \\"hi\\""'):
            traced = [
                twin.traced_call_message(b"12", b"echo", given, TRACEPARENT, state)
                for twin in (pure_splice, compiled_splice)
            ]
            assert traced[0] == traced[1]


@pytest.mark.parametrize("splice", [pure_splice, compiled_splice], ids=["pure", "compiled"])
def test_splice_makes_what_it_says(splice):
    # Agreement alone would pass if both twins went wrong alike: these are the answers themselves.
    ids = {value: splice.json_id(_as_raw(value)) for value in _JSON_VALUES}
    assert {value for value, found in ids.items() if found == value} == {
        b'"a"',
        b'"\\u00e9 \\" x"',
        b"0",
        b"-1",
        b"1.5e3",
        b"12345678901234567890",
        '"é"'.encode(),
    }
    assert all(found is None for value, found in ids.items() if found != value)
    assert [splice.first_byte(_as_raw(v)) for v in (b"{}", b"[1]", b'"x"', b"")] == [0x7B, 0x5B, 0x22, -1]
    result = splice.jsonrpc_result(b'"r"', _as_raw(b'{"content":[]}'))
    assert result == b'{"jsonrpc":"2.0","id":"r","result":{"content":[]}}'
    result = splice.complete_result(b'"r"', _as_raw(b'{"content":[],"isError":true}'))
    assert (
        result == b'{"jsonrpc":"2.0","id":"r","result":{"resultType":"complete","content":[],"isError":true}}'
    )
    result = splice.complete_result(b"1", b'{ "content" : [ ] }')
    assert result == b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete", "content" : [ ] }}'
    call = splice.call_message(b"9", b"echo", _as_raw(b'{"text":"hi"}'))
    assert call == b'{"type":"call","id":"9","name":"echo","arguments":{"text":"hi"}}'
    call = splice.traced_call_message(b"9", b"echo", _as_raw(b"{}"), TRACEPARENT, b"")
    assert json.loads(call) == {
        "type": "call",
        "id": "9",
        "name": "echo",
        "arguments": {},
        "traceparent": TRACEPARENT.decode(),
    }
    call = splice.traced_call_message(b"9", b"echo", b'{"a":1}', TRACEPARENT, b'"k=\\"v\\""')
    assert json.loads(call) == {
        "type": "call",
        "id": "9",
        "name": "echo",
        "arguments": {"a": 1},
        "traceparent": TRACEPARENT.decode(),
        "tracestate": 'k="v"',
    }
    with pytest.raises(TypeError):
        splice.jsonrpc_result(None, b"{}")
    with pytest.raises(TypeError):
        splice.complete_result(None, b'{"content":[]}')


# -- a member kept as Raw, read as the checks compare it ------------------------------------------

# (JSON, what json_member reads): strings with and without escapes, null, and every other type.
_MEMBERS = [
    (b'"tools/call"', "tools/call"),
    (b'""', ""),
    ('"é 日本 🙂"'.encode(), "é 日本 🙂"),
    (b'"tools\\/call"', "tools/call"),
    (b'"a\\"b\\\\"', 'a"b\\'),
    (b'"\\u00e9\\ud83d\\ude42"', "é🙂"),
    (b"null", None),
    (b"0", pure_splice.NOT_TEXT),
    (b"-1.5", pure_splice.NOT_TEXT),
    (b"true", pure_splice.NOT_TEXT),
    (b"false", pure_splice.NOT_TEXT),
    (b"[]", pure_splice.NOT_TEXT),
    (b'["tools/call"]', pure_splice.NOT_TEXT),
    (b'{"a":"b"}', pure_splice.NOT_TEXT),
]


@pytest.mark.parametrize(("json", "expected"), _MEMBERS, ids=[repr(json) for json, _ in _MEMBERS])
@pytest.mark.parametrize("splice", [pure_splice, compiled_splice], ids=["pure", "compiled"])
def test_json_member_reads_a_string_null_or_nothing_else(splice, json, expected):
    member = msgspec.json.decode(b'{"m":' + json + b"}", type=dict[str, msgspec.Raw])["m"]
    found = splice.json_member(member)
    assert found == expected and type(found) is type(expected)
    assert splice.json_member(msgspec.UNSET) is msgspec.UNSET
    # Equal to no text at all: a check comparing it with a name or a version fails.
    assert pure_splice.NOT_TEXT != "" and pure_splice.NOT_TEXT is not None


def test_json_member_twins_agree_on_random_strings():
    rng = random.Random(7)
    alphabet = 'ab"\\/é日🙂\n\t\u0001'
    for _ in range(2_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        # As msgspec writes it (UTF-8 as it is), and as json.dumps does (every non-ASCII escaped).
        for encoded in (msgspec.json.encode(text), json.dumps(text).encode()):
            member = msgspec.json.decode(b"[" + encoded + b"]", type=list[msgspec.Raw])[0]
            assert compiled_splice.json_member(member) == pure_splice.json_member(member) == text


# -- a result's shape, found without decoding it ----------------------------------------------

# (result, what it is): every case the compiled walk handles itself, and those it leaves to the twin.
_SHAPES = [
    (b'{"content":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[{"type":"text","text":"hi"}]}', pure_splice.SHAPE_CONTENT),
    (b' {\r\n\t"content" : [ ] , "resultType" : "complete" } ', pure_splice.SHAPE_TYPED),
    (b'{"resultType":null,"content":[1]}', pure_splice.SHAPE_TYPED),
    (b'{"content":[],"resultType":"x","structuredContent":{"a":[1,{"b":"}]"}]},"_meta":{}}', pure_splice.SHAPE_TYPED),
    (b'{"n":-1.5e3,"t":true,"f":false,"z":null,"content":[[],{}],"e":[]}', pure_splice.SHAPE_CONTENT),
    # Not a content array, or not an object at all.
    (b'{"content":{}}', pure_splice.SHAPE_BAD),
    (b'{"content":"[x"}', pure_splice.SHAPE_BAD),
    (b'{"content":null}', pure_splice.SHAPE_BAD),
    (b'{"content":1}', pure_splice.SHAPE_BAD),
    (b'{"resultType":"complete"}', pure_splice.SHAPE_BAD),
    (b"{}", pure_splice.SHAPE_BAD),
    (b" { } ", pure_splice.SHAPE_BAD),
    (b"[]", pure_splice.SHAPE_BAD),
    (b'"content"', pure_splice.SHAPE_BAD),
    (b"1", pure_splice.SHAPE_BAD),
    (b"null", pure_splice.SHAPE_BAD),
    # A member named again: the last one counts, as msgspec reads it.
    (b'{"content":{},"content":[1]}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"content":{}}', pure_splice.SHAPE_BAD),
    # Only the top level counts; strings that look like members are strings.
    (b'{"x":{"content":[1]},"content":5}', pure_splice.SHAPE_BAD),
    (b'{"x":{"content":[1],"resultType":1}}', pure_splice.SHAPE_BAD),
    (b'{"x":"\\"content\\":[","content":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"x":"\\\\","content":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"x":["]","}"],"content":[],"y":"\\\\\\""}', pure_splice.SHAPE_CONTENT),
    ('{"é":"ü","content":["\u2028"]}'.encode(), pure_splice.SHAPE_CONTENT),
    # Escaped member names (the compiled walk hands these to the twin).
    (b'{"\\u0063ontent":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"resultTyp\\u0065":0}', pure_splice.SHAPE_TYPED),
    (b'{"a\\\\":1,"content":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"conten\\"t":[]}', pure_splice.SHAPE_BAD),
    # A tool error from the app: isError true, and only true (the last one counts).
    (b'{"content":[],"isError":true}', pure_splice.SHAPE_CONTENT + pure_splice.SHAPE_ERROR),
    (b'{"isError" : true , "resultType":"complete","content":[1]}', pure_splice.SHAPE_TYPED + pure_splice.SHAPE_ERROR),
    (b'{"content":[],"isError":false}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"isError":"true"}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"isError":1}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"isError":null}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"isError":true,"isError":false}', pure_splice.SHAPE_CONTENT),
    (b'{"content":[],"isError":false,"isError":true}', pure_splice.SHAPE_CONTENT + pure_splice.SHAPE_ERROR),
    (b'{"x":{"isError":true},"content":[]}', pure_splice.SHAPE_CONTENT),
    (b'{"isErro\\u0072":true,"content":[]}', pure_splice.SHAPE_CONTENT + pure_splice.SHAPE_ERROR),
    (b'{"isError":true,"content":{}}', pure_splice.SHAPE_BAD),
]  # fmt: skip


@pytest.mark.parametrize(("result", "shape"), _SHAPES)
@pytest.mark.parametrize("splice", [pure_splice, compiled_splice], ids=["pure", "compiled"])
def test_result_shape_is_what_it_says(splice, result, shape):
    msgspec.json.decode(result)  # every case is valid JSON, as a result msgspec has read is
    assert splice.result_shape(result) == shape
    assert splice.result_shape(_as_raw(result.strip())) == shape


def test_compiled_result_shape_walks_and_leaves_only_escaped_names_to_the_twin(monkeypatch):
    # Agreement would hold if the compiled twin always asked the pure one: it must not.
    def refuse(result):
        raise LookupError("left to the twin")

    monkeypatch.setattr(pure_splice, "result_shape", refuse)
    for result, shape in _SHAPES:
        if b"\\" in result.partition(b":")[0] or b'"resultTyp\\' in result or b'"a\\' in result:
            with pytest.raises(LookupError):
                compiled_splice.result_shape(result)
        else:
            assert compiled_splice.result_shape(result) == shape


def _random_json(rnd: random.Random, depth: int) -> bytes:
    blank = rnd.choice([b"", b"", b" ", b"\n\t "])
    kind = rnd.randrange(8 if depth < 4 else 4)
    if kind == 0:
        value = rnd.choice([b"0", b"-12.5e-3", b"true", b"false", b"null", b"7"])
    elif kind == 1:
        value = msgspec.json.encode(rnd.choice(["", "x", "\\", '"', '\\"', "}]", '{"content":[]}', "é\n"]))
    elif kind == 2:
        value = rnd.choice([b'"\\u0063"', b'"\\\\"', b'"a\\"b"', b'"\\/"'])
    elif kind in (3, 4, 5):
        value = _random_object(rnd, depth + 1)
    else:
        items = [_random_json(rnd, depth + 1) for _ in range(rnd.randrange(4))]
        value = b"[" + b",".join(items) + b"]"
    return blank + value + blank


_NAMES = [
    b'"content"',
    b'"resultType"',
    b'"x"',
    b'"contents"',
    b'"\\u0063ontent"',
    b'"Content"',
    b'"resultTyp"',
    b'""',
]


def _random_object(rnd: random.Random, depth: int) -> bytes:
    members = [rnd.choice(_NAMES) + b":" + _random_json(rnd, depth) for _ in range(rnd.randrange(5))]
    return b"{" + b",".join(members) + b"}"


def test_result_shape_twins_agree_on_random_json():
    rnd = random.Random(20261130)
    seen = set()
    for _ in range(3000):
        result = _random_object(rnd, 0) if rnd.random() < 0.9 else _random_json(rnd, 0)
        msgspec.json.decode(result)
        shape = pure_splice.result_shape(result)
        assert compiled_splice.result_shape(result) == shape, result
        seen.add(shape)
    assert seen == {pure_splice.SHAPE_BAD, pure_splice.SHAPE_CONTENT, pure_splice.SHAPE_TYPED}


# -- a batch's length: counted, not decoded ---------------------------------------------------------

# (JSON, limit, what array_length says): elements of every kind, commas and brackets in strings.
_LENGTHS = [
    (b"[]", 5, 0),
    (b" \n[ \t]\r\n", 5, 0),
    (b"[1]", 5, 1),
    (b'[1,"a",null,true,{},[]]', 10, 6),
    (b'[[1,2,[3,4]],{"a":[5,6],"b":{"c":7}},"x,]","y\\\\",",[{"]', 10, 5),
    (b'["a\\"b,c",  -1.5e3 , "\\\\"]', 10, 3),
    (b"  [ 1 , 2 ]  ", 10, 2),
    # The count stops at limit + 1.
    (b"[1,2,3,4]", 2, 3),
    (b"[1,2,3,4]", 3, 4),
    (b"[1,2,3,4]", 4, 4),
    (b"[[],[],[]]", 0, 1),
    # Not an array.
    (b"{}", 5, -1),
    (b'"[1,2]"', 5, -1),
    (b" 7", 5, -1),
    (b"null", 5, -1),
]


@pytest.mark.parametrize(("text", "limit", "length"), _LENGTHS)
@pytest.mark.parametrize("splice", [pure_splice, compiled_splice], ids=["pure", "compiled"])
def test_array_length_counts_the_elements_up_to_one_past_the_limit(splice, text, limit, length):
    msgspec.json.decode(text)  # every case is JSON
    assert splice.array_length(text, limit) == length


def test_array_length_twins_agree_on_random_arrays():
    rnd = random.Random(7)
    for _ in range(2000):
        items = [_random_json(rnd, 1) for _ in range(rnd.randrange(12))]
        text = rnd.choice([b"", b" ", b"\n"]) + b"[" + b",".join(items) + b"]"
        if not items and rnd.random() < 0.5:
            text = b"[ ]"
        limit = rnd.randrange(12)
        assert compiled_splice.array_length(text, limit) == pure_splice.array_length(text, limit), text
        assert pure_splice.array_length(text, 100) == len(msgspec.json.decode(text))


def test_compiled_array_length_walks_any_bytes_without_reading_past_them():
    # Before the body is known to be JSON: whatever it counts, it stays within the bytes.
    rnd = random.Random(5)
    pieces = [b"[", b"]", b"{", b"}", b",", b'"', b"\\", b" ", b"1", b"a", b":"]
    for _ in range(5000):
        text = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 30)))
        assert -1 <= compiled_splice.array_length(text, 5) <= 6
    for text in (b"[", b"[1,", b'["abc', b'["a\\', b"[[[[", b"[1,2,", b" "):
        assert compiled_splice.array_length(text, 5) in (-1, 0, 1, 2)
    assert compiled_splice.array_length(b"", 5) == -1


# -- the request reader: the same requests and the same state, whatever the chunking ------------


_REQUESTS = [
    b'POST /mcp HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nContent-Length: 7\r\n\r\n{"a":1}',
    b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: 1\r\nx: 2\r\n\r\n",
    b"POST /mcp/tok HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    b"GET /mcp HTTP/1.0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
    # Known names in other cases, an empty value, a value's inner and trailing spaces.
    b"HEAD /healthz HTTP/1.1\r\nHOST: a\r\nAccept-Encoding: gzip\r\nX-Empty:\r\nX-Spaces: a  b \r\n\r\n",
    # A name longer than the compiled twin lowers in place.
    b"OPTIONS /mcp HTTP/1.1\r\nOrigin: http://localhost\r\nX-" + b"LoNg" * 20 + b": v\r\n\r\n",
    b"DELETE /mcp HTTP/1.1\r\nMcp-Session-Id: s\r\nmcp-session-id: t\r\nContent-Length: 0\r\n\r\n",
    # Trailer fields after the last chunk (httptools reports them as headers).
    b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-Trailer: t\r\n\r\n",
    # A name repeated in the head and again in the trailer: one value, in order.
    b"POST /mcp HTTP/1.1\r\nX-T: a\r\nTransfer-Encoding: chunked\r\nx-t: b\r\n\r\n0\r\nX-T: c\r\n\r\n",
    # Known names again, with values of the same length as the first request's but other bytes.
    b'POST /mcp HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer u\r\nContent-Length: 7\r\n\r\n{"b":2}',
    # A known name twice with one value (the compiled twin may give both the same object).
    b"GET /healthz HTTP/1.1\r\nHost: a\r\nHOST: a\r\n\r\n",
]
_ENDINGS = [
    b"",
    b"GET /connect HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x80abcd",
    b"POST /mcp HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
    b"POST /mcp HTTP/1.0\r\nContent-Length: 4194305\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: " + b"y" * 20_000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: " + b"y" * 20_000,
    b"BAD REQUEST LINE\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: a\r\n  folded\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
    b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
    b"GET / HTTP/1.1\r\nX : y\r\n\r\n",
    b"BREW /pot HTTP/1.1\r\n\r\n",
    b"GET /" + b"u" * 20_000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X-A: " + b"b" * 100 + b"\r\n" + b"X-B: c\r\n" * 2500 + b"\r\n",
]


def _read(module, chunks: list[bytes], max_body: int = MAX) -> tuple:
    from collections import deque

    queue: deque = deque()
    reader = module.RequestReader(queue, Request, 16 * 1024, max_body)
    returned = [reader.feed(chunk) for chunk in chunks]
    requests = [
        (r.method, r.target, r.headers, set(r.repeated), r.body, r.keep_alive, r.http11, r.known, r.others)
        for r in queue
    ]
    upgrade = None if reader.upgrade is None else (reader.upgrade[0].target, reader.upgrade[1])
    state = (reader.in_head, reader.in_body, reader.expect_continue, reader.stopped, reader.refusal)
    # What feed returns is that state, as bits (one definition of the bits serves both twins).
    bits = (
        pure_http_reader.READING_HEAD * reader.in_head
        | pure_http_reader.READING_BODY * reader.in_body
        | pure_http_reader.EXPECTS_CONTINUE * reader.expect_continue
        | pure_http_reader.STOPPED * reader.stopped
        | pure_http_reader.REFUSED * (reader.refusal is not None)
    )
    assert returned[-1:] == ([bits] if chunks else [])
    return requests, upgrade, state, returned


def test_request_reader_twins_agree_on_random_pipelines_in_random_chunks():
    rnd = random.Random(11)
    for _ in range(400):
        stream = b"".join(rnd.choice(_REQUESTS) for _ in range(rnd.randint(0, 4))) + rnd.choice(_ENDINGS)
        if not stream:
            continue
        cuts = sorted(rnd.sample(range(1, len(stream)), min(len(stream) - 1, rnd.randint(0, 8))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
        assert _read(pure_http_reader, chunks) == _read(compiled_http_reader, chunks)


def test_request_reader_twins_agree_byte_at_a_time():
    # HTTP/1.0 without keep-alive ends the connection's requests, so it is not in this pipeline.
    kept_alive = [request for request in _REQUESTS if b"HTTP/1.0" not in request]
    stream = b"".join(kept_alive) + _ENDINGS[1]
    chunks = [stream[i : i + 1] for i in range(len(stream))]
    pure = _read(pure_http_reader, chunks)
    assert pure == _read(compiled_http_reader, chunks)
    assert len(pure[0]) == len(kept_alive) + 1 and pure[1] is not None  # every request, then the upgrade


@pytest.mark.parametrize("module", [pure_http_reader, compiled_http_reader], ids=["pure", "compiled"])
def test_request_reader_feed_returns_its_state(module):
    # The bits are defined once, by the pure twin.
    head, body, expects = (
        pure_http_reader.READING_HEAD,
        pure_http_reader.READING_BODY,
        pure_http_reader.EXPECTS_CONTINUE,
    )
    refused = pure_http_reader.STOPPED | pure_http_reader.REFUSED
    chunks = [
        b"POST /mcp HTTP/1.1\r\nHo",
        b"st: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"{}",
    ]
    assert _read(module, chunks)[3] == [head, body | expects, 0]
    chunks = [b"POST /mcp HTTP/1.1\r\nX: 1\r\n", b"\x00\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n"]
    assert _read(module, chunks)[3] == [head, refused, refused]  # and nothing more is read


@pytest.mark.parametrize("max_body", [0, 9, 10, 99_999, 100_000])
def test_request_reader_bounds_bodies_by_the_limit_it_is_given(max_body):
    # The limit is the caller's (MAX_MESSAGE_BYTES on the bridge): a body over it is read no
    # further, its request is the last (answered 413), whether its length is said or chunked.
    stated = b"POST /mcp HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % max_body + b"x" * max_body
    over = b"POST /mcp HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (max_body + 1) + b"x" * (max_body + 1)
    chunked = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % (max_body + 1)
    chunked += b"y" * (max_body + 1) + b"\r\n0\r\n\r\n"
    for stream, bodies in (
        (stated + stated, [b"x" * max_body] * 2),
        (stated + over + stated, [b"x" * max_body, None]),
        (chunked + stated, [None]),
    ):
        for chunks in ([stream], [stream[i : i + 7] for i in range(0, len(stream), 7)]):
            pure = _read(pure_http_reader, chunks, max_body)
            assert pure == _read(compiled_http_reader, chunks, max_body)
            assert [request[4] for request in pure[0]] == bodies
            assert pure[2][3] is (None in bodies)  # stopped after a body too large


@pytest.mark.parametrize("module", [pure_http_reader, compiled_http_reader], ids=["pure", "compiled"])
def test_request_reader_reads_what_was_sent(module):
    # Agreement alone would pass if both twins went wrong alike: these are the answers themselves.
    requests, upgrade, state, returned = _read(module, [b"".join(_REQUESTS[5:9])])
    assert returned == [0]  # every request read whole: neither in a head nor in a body
    head, options, delete, chunked = requests
    assert head[:2] == (b"HEAD", b"/healthz")
    assert head[2] == {b"host": b"a", b"accept-encoding": b"gzip", b"x-empty": b"", b"x-spaces": b"a  b "}
    # The names of KNOWN_NAMES by position, the others in a dict.
    assert [(KNOWN_NAMES[i], value) for i, value in enumerate(head[7]) if value is not None] == [
        (b"accept-encoding", b"gzip"),
        (b"host", b"a"),
    ]
    assert head[8] == {b"x-empty": b"", b"x-spaces": b"a  b "}
    assert options[2] == {b"origin": b"http://localhost", b"x-" + b"long" * 20: b"v"}
    assert (delete[2][b"mcp-session-id"], delete[3]) == (b"s, t", {b"mcp-session-id"})
    assert (delete[7][MCP_SESSION_ID], delete[8]) == (b"s, t", None)
    assert (chunked[2][b"x-trailer"], chunked[4]) == (b"t", b"a")
    repeated = _read(module, [_REQUESTS[9]])[0][0]
    assert (repeated[2][b"x-t"], repeated[3]) == (b"a, b, c", {b"x-t"})
    assert repeated[8] == {b"x-t": b"a, b, c"}
    # Values of a name change from request to request, whatever the previous one was.
    first, other, again = _read(module, [_REQUESTS[0], _REQUESTS[10], _REQUESTS[0]])[0]
    assert [r[2][b"authorization"] for r in (first, other, again)] == [b"Bearer t", b"Bearer u", b"Bearer t"]
    assert [r[2][b"host"] for r in (first, other, again)] == [b"a", b"b", b"a"]
    twice = _read(module, [_REQUESTS[11]])[0][0]
    assert (twice[2][b"host"], twice[3]) == (b"a, a", {b"host"})
    many = _read(module, [b"GET / HTTP/1.1\r\n" + b"X: c\r\n" * 2000 + b"\r\n"])[0][0]
    assert many[2][b"x"] == b", ".join([b"c"] * 2000)
    assert upgrade is None and state == (False, False, False, False, None)
    many_headers = _ENDINGS[-1]
    assert _read(module, [many_headers])[2][4] == (431, "request head larger than the limit")
    assert _read(module, [_ENDINGS[-2]])[2][4] == (431, "request head larger than the limit")
    assert _read(module, [b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n"])[2][4] == (400, "malformed HTTP request")


# Every method llhttp knows (its HTTP_ALL_METHOD_MAP), and one it does not: each is read, or
# refused, alike by the llhttp compiled in and by httptools' own.
_LLHTTP_HEADER = (
    Path(__file__).resolve().parents[1] / "vendor" / "llhttp" / "include" / "llhttp.h"
).read_text()
_ALL_METHODS = _LLHTTP_HEADER.split("#define HTTP_ALL_METHOD_MAP(XX)", 1)[1].split("\n\n", 1)[0]
_METHODS = re.findall(r"XX\(\d+, \w+, ([A-Z-]+)\)", _ALL_METHODS)


@pytest.mark.parametrize("method", [*_METHODS, "BREW"])
def test_request_reader_twins_agree_on_every_method(method):
    assert len(_METHODS) > 40 and {"GET", "POST", "DELETE", "CONNECT", "QUERY"} <= set(_METHODS)
    for target in (b"/mcp", b"*", b"a:443"):
        request = b"%s %s HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}" % (method.encode(), target)
        chunks = [request, b"GET /mcp HTTP/1.1\r\nUpgrade: x\r\n\r\nafter"]
        assert _read(pure_http_reader, chunks) == _read(compiled_http_reader, chunks)
    requests = _read(compiled_http_reader, [b"%s /mcp HTTP/1.1\r\n\r\n" % method.encode()])[0]
    if method in ("GET", "POST", "DELETE", "OPTIONS", "HEAD"):
        assert [r[0] for r in requests] == [method.encode()]


def test_compiled_request_reader_is_built_on_the_vendored_llhttp_not_httptools():
    # vendor/llhttp's release, as its header and README say, is the one compiled in.
    version = tuple(
        int(re.search(rf"#define LLHTTP_VERSION_{part} (\d+)", _LLHTTP_HEADER).group(1))
        for part in ("MAJOR", "MINOR", "PATCH")
    )
    readme = (Path(__file__).resolve().parents[1] / "vendor" / "llhttp" / "README.md").read_text()
    assert compiled_http_reader.LLHTTP_VERSION == version
    assert readme.startswith("# llhttp %d.%d.%d\n" % version)
    # It reads requests with an empty stand-in for httptools (the pure twin imports it, and
    # uses it only when reading), and no httptools module is loaded on the way.
    script = """
import sys, types
from collections import deque
sys.modules["httptools"] = types.ModuleType("httptools")
from clientmcp_fast._speedups import http_reader
from clientmcp_fast.core.http import Request
queue = deque()
reader = http_reader.RequestReader(queue, Request, 4096, 4 * 1024 * 1024)
reader.feed(b"POST /mcp HTTP/1.1\\r\\nHost: a\\r\\nX: 1\\r\\nx: 2\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
reader.feed(b"GET /connect HTTP/1.1\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\ntail")
loaded = [name for name in sys.modules if name.startswith("httptools.")]
try:
    with open("/proc/self/maps") as maps:
        loaded += [line.split()[-1] for line in maps if "httptools" in line]
except OSError:
    pass
print(repr(([(r.method, r.target, r.headers, r.body, r.keep_alive) for r in queue], reader.upgrade[1], loaded)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert ast.literal_eval(done.stdout) == (
        [
            (b"POST", b"/mcp", {b"host": b"a", b"x": b"1, 2", b"content-length": b"2"}, b"{}", True),
            (b"GET", b"/connect", {b"upgrade": b"websocket", b"connection": b"Upgrade"}, b"", True),
        ],
        b"tail",
        [],
    )


def test_compiled_request_reader_keeps_its_llhttp_to_itself():
    # Built with hidden visibility: no llhttp function of the module can be bound to, nor bind
    # to another llhttp's (httptools' own, loaded by the pure twin's import).
    library = ctypes.CDLL(compiled_http_reader.__file__)
    assert hasattr(library, "PyInit_http_reader")
    for name in ("llhttp_init", "llhttp_execute", "llhttp_settings_init", "llhttp_method_name"):
        assert not hasattr(library, name), name


def test_built_extensions_that_refuse_to_load_fall_back_with_a_warning():
    # As a built module would that raised ImportError at import (one built for another platform).
    script = """
import sys, warnings
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "clientmcp_fast._speedups.http_reader":
            raise ImportError("refused for the test")
sys.meta_path.insert(0, Refuse())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from clientmcp_fast import speedups
print(speedups.IMPLEMENTATION, [str(w.message) for w in caught])
"""
    env = {key: value for key, value in os.environ.items() if key != "CLIENTMCP_NO_EXTENSIONS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split(" ", 1) == [
        "pure",
        "['clientmcp_fast extensions not used (refused for the test); using the pure-Python twins']\n",
    ]


class _FailingQueue(list):
    """A queue whose append raises inside the reader's callback, as a bug or a MemoryError there would."""

    def append(self, request: object) -> None:
        raise MemoryError("injected")


@pytest.mark.parametrize("module", [pure_http_reader, compiled_http_reader], ids=["pure", "compiled"])
def test_an_exception_inside_the_request_reader_is_raised_not_made_a_400(module):
    """Only the peer's bytes make a refusal: an error of the bridge's own surfaces as itself (as httptools does)."""
    reader = module.RequestReader(_FailingQueue(), Request, 16 * 1024, MAX)
    with pytest.raises(MemoryError, match="^injected$"):
        reader.feed(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reader.refusal is None
    refused = module.RequestReader([], Request, 16 * 1024, MAX)
    refused.feed(b"BAD REQUEST LINE\r\n\r\n")
    assert refused.refusal == (400, "malformed HTTP request")
    too_large = module.RequestReader([], Request, 64, MAX)
    too_large.feed(b"GET /" + b"u" * 100 + b" HTTP/1.1\r\n\r\n")
    assert too_large.refusal is not None and too_large.refusal[0] == 431
