"""Writes the seed inputs of each target into tests/fuzz/corpus/<target>/seed-*: `python -m tests.fuzz.seeds`.

Real requests, frames, messages and tokens, each cut or flagged as its target reads
them, so that the fuzzer starts from inputs that reach deep into the code. The files
are kept in the repository; this module says how they were made.
"""

from __future__ import annotations

import json

from fakes import NOW, SECRET, token
from wire import MASK, Op, client_close, client_frame, client_header

from clientmcp_fast.core.tokens import mint

from . import CORPUS
from .chunks import FILL, encode
from .fuzz_tokens import OTHER_SECRET

ZERO_MASK = b"\0\0\0\0"  # payloads stay readable in the files, and are mutated as they are


def compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def frame(opcode: int, payload: bytes = b"", **options) -> bytes:
    return client_frame(opcode, payload, mask=options.pop("mask", ZERO_MASK), **options)


def http_reader() -> dict[str, bytes]:
    body = compact({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    post = b"POST /mcp HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer t\r\nContent-Type: application/json\r\n"
    post += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    upgrade = (
        b"GET /connect HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Protocol: clientmcp.v1, t\r\n\r\n" + frame(Op.TEXT, b'{"type":"ping"}')
    )
    chunked = b'POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\nX-T: t\r\n\r\n'
    return {
        "post": encode(0, [post]),
        "post-in-reads": encode(0, [post[:3], post[3:40], post[40:41], post[41:]]),
        "pipeline": encode(0, [post + post.replace(b"POST", b"HEAD") + b"GET /healthz HTTP/1.1\r\n\r\n"]),
        "upgrade-with-frame": encode(0, [upgrade]),
        "upgrade-elsewhere": encode(0, [upgrade.replace(b"/connect", b"/_echo")]),
        "chunked-with-trailer": encode(0, [chunked[:50], chunked[50:]]),
        "expect-continue": encode(
            0, [b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", b"{}"]
        ),
        "http10": encode(0, [b"POST /mcp HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}"]),
        "http2": encode(0, [b"GET / HTTP/2.0\r\n\r\n"]),
        "gzip": encode(0, [b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"]),
        "length-and-chunked": encode(
            0, [b"POST /mcp HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"]
        ),
        "length-over-4mib": encode(0, [b"POST /mcp HTTP/1.1\r\nContent-Length: 4194305\r\n\r\n"]),
        "repeated-headers": encode(
            0,
            [b"DELETE /mcp HTTP/1.1\r\nMcp-Session-Id: s\r\nmcp-session-id: t\r\nX-A: 1\r\nx-a: 2\r\n\r\n"],
        ),
        "absolute-form": encode(0, [b"POST http://b/mcp?x HTTP/1.1\r\nContent-Length: 0\r\n\r\n"]),
        "obs-fold": encode(0, [b"GET / HTTP/1.1\r\nX: a\r\n  folded\r\n\r\n"]),
        "head-over-64": encode(0x60, [post[:30], post[30:]]),
        "url-over-64": encode(0x60, [b"GET /" + b"u" * 100 + b" HTTP/1.1\r\n\r\n"]),
        # Followed past 4 MiB (FILL): a chunked body, a body of exactly 4 MiB, chunks after a chunk.
        "chunked-over-4mib": encode(FILL, [b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"]),
        "body-of-4mib": encode(FILL, [b"POST /mcp HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n"]),
        "chunked-after-a-chunk": encode(
            FILL, [b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"]
        ),
    }


def websocket() -> dict[str, bytes]:
    text = frame(Op.TEXT, b'{"type":"register","tools":[]}')
    return {
        "text": encode(0, [text]),
        "text-masked": encode(0, [client_frame(Op.TEXT, "héllo wörld".encode(), mask=MASK)]),
        "exact-ping": encode(0x10, [frame(Op.TEXT, b'{"type":"ping"}')]),
        "text-in-reads": encode(0x10, [text[:1], text[1:2], text[2:7], text[7:]]),
        "fragments": encode(
            0x20,
            [
                frame(Op.TEXT, b'{"type":', fin=False),
                frame(Op.PING, b"p"),
                frame(Op.CONTINUATION, b'"ping"}'),
            ],
        ),
        "utf8-split-in-fragments": encode(
            0, [frame(Op.TEXT, "é".encode()[:1], fin=False), frame(Op.CONTINUATION, "é".encode()[1:])]
        ),
        "invalid-utf8": encode(0, [frame(Op.TEXT, b"\xff\xfe")]),
        "binary": encode(0, [frame(Op.BINARY, b"\0\1\2")]),
        "ping-pong": encode(0, [frame(Op.PING, b"hello") + frame(Op.PONG, b"")]),
        "close-with-reason": encode(0, [client_close(1000, b"bye")]),
        "close-4000": encode(0, [frame(Op.TEXT, b"x") + client_close(4000)]),
        "close-empty": encode(0, [client_close()]),
        "close-1-byte": encode(0, [frame(Op.CLOSE, b"\x03")]),
        "close-reserved-code": encode(0, [client_close(1005)]),
        "close-bad-utf8": encode(0, [client_close(1000, b"\xc3")]),
        "unmasked": encode(0, [client_frame(Op.TEXT, b"x", mask=None)]),
        "reserved-bits": encode(0, [client_frame(Op.TEXT, b"x", rsv=0x40, mask=ZERO_MASK)]),
        "unknown-opcode": encode(0, [client_frame(0x3, b"x", mask=ZERO_MASK)]),
        "fragmented-ping": encode(0, [frame(Op.PING, b"x", fin=False)]),
        "long-ping": encode(0, [frame(Op.PING, b"x" * 126)]),
        "continuation-first": encode(0, [frame(Op.CONTINUATION, b"x")]),
        "text-inside-fragments": encode(0, [frame(Op.TEXT, b"a", fin=False), frame(Op.TEXT, b"b")]),
        "length-16-bit": encode(0, [frame(Op.BINARY, b"y" * 300)]),
        "length-64-bit-msb": encode(0, [b"\x82\xff\x80" + b"\0" * 7 + ZERO_MASK]),
        "length-over-4mib": encode(0, [client_header(Op.BINARY, 4 * 1024 * 1024 + 1, mask=ZERO_MASK)]),
        # Followed past 4 MiB (FILL): a fragmented binary message, and a text one mid-character.
        "fragments-over-4mib": encode(FILL, [frame(Op.BINARY, b"z", fin=False)]),
        "text-fragments-over-4mib": encode(FILL, [frame(Op.TEXT, "é".encode()[:1], fin=False)]),
    }


def channel() -> dict[str, bytes]:
    register = {"type": "register", "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    result = {"type": "result", "id": "1", "result": {"content": [{"type": "text", "text": "x"}]}}
    header_tool = {
        "name": "h",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    }
    lines = {
        "register-then-result": [register, result],
        "typed-result": [register, {**result, "result": {"content": [], "resultType": "complete"}}],
        "results-for-two-calls": [register, result, {**result, "id": "2"}, {**result, "id": "9"}],
        "register-with-instructions": [{**register, "instructions": "use t"}, {**register, "tools": []}],
        "header-parameters": [{"type": "register", "tools": [header_tool]}],
        "no-input-schema": [{"type": "register", "tools": [{"name": "noschema"}]}],
        "invalid-tool-name": [{"type": "register", "tools": [{"name": "a b", "inputSchema": {}}]}],
        "register-not-a-list": [{"type": "register", "tools": {}}],
        "duplicate-tools": [{"type": "register", "tools": [register["tools"][0]] * 2}],
        "ping": [{"type": "ping"}, {"type": "ping", "id": 1}],
        "unknown-type": [{"type": "hello"}, register, result],
        "bridge-type": [{"type": "call"}],
        "result-id-number": [register, {**result, "id": 1}],
        "result-missing": [register, {"type": "result", "id": "1"}],
        "result-bad-shape": [register, {**result, "result": {"content": {}}}],
        "no-type": [{"id": "1"}],
        "type-number": [{"type": 1}],
        "not-object": [[1, 2]],
    }
    seeds = {name: b"\n".join(compact(m) for m in messages) for name, messages in lines.items()}
    seeds["exact-ping"] = b'{"type":"ping"}'
    seeds["not-json"] = b'{"type":'
    seeds["not-utf8"] = b'{"type":"\xff"}'
    seeds["too-deep"] = b'{"type":"x","result":' + b"[" * 1200 + b"]" * 1200 + b"}"
    return seeds


def jsonrpc() -> dict[str, bytes]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "a", "arguments": {}, "_meta": meta},
    }
    seeds = {
        "modern-call": compact(call),
        "legacy-initialize": compact(
            {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
        ),
        "listen": compact(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
            }
        ),
        "cancelled": compact(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        ),
        "batch": compact([call, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, 3]),
        "wrong-types": compact({"jsonrpc": 2, "id": [1], "method": 7, "params": {"name": {}, "_meta": [1]}}),
        "meta-wrong-types": compact(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "x",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 1}},
            }
        ),
        "params-not-object": b'{"jsonrpc":"2.0","id":7,"params":[]}',
        "scalar": b"42",
        "not-json": b'{"jsonrpc":',
        "too-deep": b"[" * 1200,
        # A wrong shape that stops the decoding before a member nested too deeply.
        "wrong-shape-then-too-deep": b'{"id":1,"params":1,"x":' + b"[" * 1200 + b"]" * 1200 + b"}",
        "batch-of-1001": b"[" + b",".join([b"{}"] * 1001) + b"]",
        "empty-batch": b" [ ] ",
    }
    return seeds


def agent() -> dict[str, bytes]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def request(head: str, body=None) -> bytes:
        text = head.strip("\n").encode() + b"\n\n"
        return text + (compact(body) if body is not None and not isinstance(body, bytes) else body or b"")

    modern = "POST /mcp\nAuthorization: Bearer $alice\nAccept: application/json, text/event-stream\n"
    modern += "MCP-Protocol-Version: 2026-07-28\n"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "a", "arguments": {}, "_meta": meta},
    }
    header_call = {
        **call,
        "params": {**call["params"], "name": "h", "arguments": {"region": "eu", "n": 3, "dry": True}},
    }
    legacy = "POST /mcp/$alice\nAccept: application/json, text/event-stream\nMcp-Session-Id: s1\n"
    legacy_call = {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "a"}}
    seeds = {
        "modern-call": request(modern + "Mcp-Method: tools/call\nMcp-Name: a\n", call),
        "modern-call-slow": request(
            modern + "Mcp-Method: tools/call\nMcp-Name: a\nx-fuzz: slow typed\n", call
        ),
        "modern-call-timeout": request(
            modern + "Mcp-Method: tools/call\nMcp-Name: a\nx-fuzz: timeout\n", call
        ),
        "modern-call-hangup": request(modern + "Mcp-Method: tools/call\nMcp-Name: a\nx-fuzz: hangup\n", call),
        "modern-header-params": request(
            modern + "Mcp-Method: tools/call\nMcp-Name: =?base64?aA==?=\nMcp-Param-Region: eu\n"
            "Mcp-Param-N: 3\nMcp-Param-Dry: true\n",
            header_call,
        ),
        "modern-list": request(
            modern + "Mcp-Method: tools/list\n",
            {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": meta}},
        ),
        "modern-discover": request(
            modern + "Mcp-Method: server/discover\n",
            {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": meta}},
        ),
        "modern-listen-change": request(
            modern + "Mcp-Method: subscriptions/listen\nx-fuzz: change\n",
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "subscriptions/listen",
                "params": {"_meta": meta, "notifications": {"toolsListChanged": True}},
            },
        ),
        "modern-mismatch": request(modern + "Mcp-Method: tools/list\nMcp-Method: tools/call\n", call),
        "legacy-initialize": request(
            legacy,
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
        ),
        "legacy-call-gone": request(legacy + "x-fuzz: gone\n", legacy_call),
        "legacy-call-bad-result": request(legacy + "x-fuzz: bad\n", legacy_call),
        "legacy-call-sse": request(legacy.replace("application/json, ", "") + "x-fuzz: slow\n", legacy_call),
        "legacy-list-bob": request(
            legacy.replace("$alice", "$bob"),
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}},
        ),
        "legacy-call-carol": request("POST /mcp\nAuthorization: Bearer $carol\n", legacy_call),
        "batch-call-and-cancel": request(
            legacy,
            [
                legacy_call,
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c"}},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                {"jsonrpc": "2.0", "id": 3, "method": "initialize"},
                4,
            ],
        ),
        "batch-with-version": request(legacy + "MCP-Protocol-Version: 2025-06-18\n", [legacy_call]),
        "get-stream": b"GET /mcp\nAuthorization: Bearer $alice\nAccept: text/event-stream\nx-fuzz: change\n\n",
        "get-modern": "GET /mcp\nAuthorization: Bearer $alice\nMCP-Protocol-Version: 2026-07-28\n\n".encode(),
        "preflight": b"OPTIONS /mcp\nOrigin: http://localhost:3000\n"
        b"Access-Control-Request-Headers: mcp-method, mcp-protocol-version\n\n",
        "preflight-bad-name": b"OPTIONS /mcp\nOrigin: http://[::1]\nAccess-Control-Request-Headers: x y\n\n",
        "preflight-no-origin": b"OPTIONS /mcp\n\n",
        "origin-refused": b"POST /mcp\nOrigin: https://evil.example\n\n{}",
        "delete": b"DELETE /mcp\nAuthorization: Bearer $alice\nOrigin: http://127.0.0.1\n\n",
        "client-token": b"POST /mcp\nAuthorization: Bearer $app\n\n{}",
        "basic-and-path-token": b"POST /mcp/$bob?x=1\nAuthorization: Basic dXNlcjpwYXNz\nAccept: text/plain\n\n{}",
        "unsupported-version": request(legacy + "MCP-Protocol-Version: 2024-01-01\n", legacy_call),
        "not-utf8": b'POST /mcp\nAuthorization: Bearer $alice\n\n"\xff"',
        "wrong-shape-then-too-deep": b"POST /mcp\nAuthorization: Bearer $alice\n\n"
        + b'{"id":1,"params":1,"x":'
        + b"[" * 1200
        + b"]" * 1200
        + b"}",
    }
    return seeds


def tokens() -> dict[str, bytes]:
    claims = {"sub": "alice", "role": "agent", "iat": int(NOW), "exp": int(NOW) + 3600}

    def raw(text: str) -> bytes:
        return b"\x00" + text.encode()

    return {
        "agent": raw(token("alice", "agent")),
        "agent-as-bytes": b"\x80" + token("alice", "agent").encode(),
        "client": raw(token("app-1")),
        "expired": raw(token("alice", "agent", now=NOW - 7200)),
        "other-secret": raw(mint(OTHER_SECRET, "agent", "bob", 60, NOW)),
        "unknown-secret": raw(mint(b"x" * 40, "agent", "bob", 60, NOW)),
        "alg-none": raw("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."),
        "padded": raw(token("alice", "agent") + "="),
        "claims": b"\x01" + compact(claims),
        "claims-other-secret": b"\x11" + compact({**claims, "role": "client"}),
        "claims-nbf-future": b"\x01" + compact({**claims, "nbf": NOW + 3600}),
        "claims-no-times": b"\x01" + compact({"sub": "a.b:c@d-e_f", "role": "client"}),
        "claims-bad-sub": b"\x01" + compact({**claims, "sub": "a b"}),
        "claims-sub-number": b"\x01" + compact({**claims, "sub": 7}),
        "claims-bad-role": b"\x01" + compact({**claims, "role": "admin"}),
        "claims-exp-string": b"\x01" + compact({**claims, "exp": "soon"}),
        "claims-exp-true": b"\x01" + compact({**claims, "exp": True}),
        "claims-exp-float": b"\x01" + compact({**claims, "exp": NOW + 0.5}),
        "claims-not-object": b"\x01[]",
        "claims-nan": b'\x01{"sub":"a","role":"agent","exp":NaN}',
        "header-hs512": b"\x02" + compact({"alg": "HS512"}) + b"\0" + compact(claims),
        "header-no-typ": b"\x02" + compact({"alg": "HS256"}) + b"\0" + compact(claims),
        "header-not-json": b"\x02{alg\0" + compact(claims),
        # Two segments as written, signed: base64 that is not the canonical spelling.
        "segments-noncanonical": b"\x03eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIiwicm9sZSI6ImFnZW50In1",
        "segments-with-pad": b"\x03eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIiwicm9sZSI6ImFnZW50In0=",
        "garbage": raw("a.b.c"),
        "secret": raw(SECRET.decode()),
    }


SEEDS = {
    "http_reader": http_reader,
    "websocket": websocket,
    "channel": channel,
    "jsonrpc": jsonrpc,
    "agent": agent,
    "tokens": tokens,
}


def main() -> None:
    for target, make in SEEDS.items():
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("seed-*"):
            stale.unlink()
        seeds = make()
        for name, data in seeds.items():
            (folder / f"seed-{name}").write_bytes(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
