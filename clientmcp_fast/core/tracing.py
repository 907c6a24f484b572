"""Trace context for calls (docs/protocol.md, Trace context): W3C values checked, and the tracer port.

The agent's `traceparent` and `tracestate` reach an app that registered `trace: true`
(`Call.traceparent`, `Call.tracestate`); a malformed one is dropped here, never forwarded.
Tracing in the bridge itself is a port, `CallTracing`: the bridge tells it of each call's
start and end, and it may replace the call's trace context with its own span's. The base
class traces nothing; the I/O side's OpenTelemetry tracer (clientmcp_fast/otel.py) is
made only when the `otel` extra is installed and configured.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clientmcp_fast.core.calls import Call

# W3C Trace Context, §3.2: version-traceid-parentid-flags, lowercase hex, 55 characters; a
# later version may append fields after a dash, which a version-00 reader drops (§4.3). Read
# at most MAX_TRACEPARENT_CHARS, so that what the bridge looks at has a bound (docs/limits.md).
TRACEPARENT_CHARS = 55
MAX_TRACEPARENT_CHARS = 512
# §3.3: at most 32 list members; a vendor's value is printable ASCII without `,` and `=`. The
# whole header is bounded here at 512 characters, the length §3.3.1.5 says a propagator must
# at least carry, so that what the bridge forwards has a bound (docs/limits.md).
MAX_TRACESTATE_CHARS = 512
_TRACESTATE_MEMBER = re.compile(
    r"[a-z0-9][_0-9a-z\-*/]{0,255}(@[a-z][_0-9a-z\-*/]{0,13})?=[ -+\--<>-~]{0,255}[!-+\--<>-~]"
)


def valid_traceparent(value: object) -> bytes | None:
    """The bytes of `value` (a header's bytes or `_meta`'s string) if it is a W3C traceparent to forward; else None.

    A later version's value is cut to its first 55 characters, which a version-00 reader keeps.
    """
    if type(value) is bytes:
        data = value
    elif type(value) is str:
        if not value.isascii():
            return None
        data = value.encode("ascii")
    else:
        return None
    length = len(data)
    if length < TRACEPARENT_CHARS or length > MAX_TRACEPARENT_CHARS:
        return None
    # The first 55 bytes (compiled, C loops over the bytes): dashes at 2, 35 and 52, lowercase
    # hex between them, and neither id all zeros.
    chars = data  # compiled, a C pointer to the bytes: no object is made per byte
    if chars[2] != 0x2D or chars[35] != 0x2D or chars[52] != 0x2D:  # "-"
        return None
    if _hex_id(chars, 0, 2) < 0 or _hex_id(chars, 53, 55) < 0:
        return None
    if _hex_id(chars, 3, 35) <= 0 or _hex_id(chars, 36, 52) <= 0:
        return None
    version = chars[0] << 8 | chars[1]
    if version == 0x3030:  # "00"
        return data if length == TRACEPARENT_CHARS else None  # version 00 has exactly four fields
    if version == 0x6666:  # "ff" is invalid
        return None
    if length == TRACEPARENT_CHARS:
        return data
    # A later version: its own fields follow a dash; what is forwarded is the first 55 bytes.
    return data[:TRACEPARENT_CHARS] if chars[TRACEPARENT_CHARS] == 0x2D and data.isascii() else None


# 1 for each lowercase hex digit's byte, 0 for every other byte.
_LOWER_HEX = bytes(int(chr(byte) in "0123456789abcdef") for byte in range(256))


def _hex_id(chars: bytes, start: int, end: int) -> int:
    """-1 unless the bytes from `start` to `end` are lowercase hex; else 0 when all are `0` (an invalid id), 1."""
    table = _LOWER_HEX  # compiled, a C pointer: one load per byte
    other = 0  # any bit of a byte that is not "0"
    for index in range(start, end):
        byte = chars[index]
        if not table[byte]:
            return -1
        other |= byte ^ 0x30
    return 1 if other else 0


def valid_tracestate(value: object) -> str | None:
    """`value` if it is a W3C tracestate within the bound (empty members skipped); else None: it is dropped."""
    if not isinstance(value, str) or not value or len(value) > MAX_TRACESTATE_CHARS:
        return None
    members = [member.strip(" \t") for member in value.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > 32:
        return None
    keys = set()
    for member in members:
        if _TRACESTATE_MEMBER.fullmatch(member) is None:
            return None
        key = member.partition("=")[0]
        if key in keys:
            return None
        keys.add(key)
    return ",".join(members)


class CallTracing:
    """What the bridge tells a tracer of each tools/call; this base class traces nothing.

    A base class rather than a Protocol, as `EventLog` is: compiled, the bridge's calls are C
    calls. The bridge holds None rather than this class when tracing is off, so that an
    untraced call pays a test, not a call.
    """

    __slots__ = ()

    def started(self, call: Call) -> None:
        """`call` is about to be sent to its app: open its span (`call.span`), and put the span's context in
        `call.traceparent` and `call.tracestate`, which the app gets. `call.traceparent` holds the agent's
        context on entry, or None."""

    def ended(self, call: Call, outcome: int) -> None:
        """`call` ended with `outcome` (an Outcome): close its span; a call refused before reaching an app
        (offline, unknown tool, busy) comes here without `started`."""
