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

# W3C Trace Context, §3.2: version-traceid-parentid-flags, lowercase hex. Version ff is invalid;
# a later version may append fields after a dash, which a version-00 reader ignores (§4.3).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?")
_ZERO_TRACE = "0" * 32
_ZERO_PARENT = "0" * 16
# §3.3: at most 32 list members; a vendor's value is printable ASCII without `,` and `=`. The
# whole header is bounded here at 512 characters, the length §3.3.1.5 says a propagator must
# at least carry, so that what the bridge forwards has a bound (docs/limits.md).
MAX_TRACESTATE_CHARS = 512
_TRACESTATE_MEMBER = re.compile(
    r"[a-z0-9][_0-9a-z\-*/]{0,255}(@[a-z][_0-9a-z\-*/]{0,13})?=[ -+\--<>-~]{0,255}[!-+\--<>-~]"
)


def valid_traceparent(value: object) -> str | None:
    """`value` if it is a W3C traceparent the bridge may forward (a later version cut to 55 characters); else None."""
    if not isinstance(value, str) or len(value) < 55 or len(value) > 512:
        return None
    found = _TRACEPARENT.fullmatch(value)
    if found is None:
        return None
    version, trace_id, parent_id, _flags, tail = found.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_PARENT:
        return None
    if version == "00":
        return value if tail is None else None  # version 00 has exactly four fields
    return value[:55]  # a later version read as 00 (§4.3), its own fields dropped


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
