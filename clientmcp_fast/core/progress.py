"""Progress of a call in flight (docs/protocol.md, Progress): what an app reports, checked and paced for the agent.

An app that registered `progress: true` may send `progress` for a call it is running. The
agent gets `notifications/progress` when its tools/call asked for it (`_meta.progressToken`);
otherwise the call has no `Progress` and the report is dropped. At most ten reports per call
reach the agent in any second, so that a short burst (0, 50, 100 within a tenth of a second)
goes as it came; a report past that waits, replaced by any later one, so a flood from an app
costs the agent at most ten events a second and the bridge one pending report per call.
"""

from __future__ import annotations

import math

import msgspec

from clientmcp_fast.core.jsonrpc import encode_json, notification

# docs/protocol.md, Progress: at most ten reports per call reach the agent in any second (docs/limits.md).
PROGRESS_PER_SECOND = 10
# docs/protocol.md, Progress: the longest message of a report, which must fit a bus field (core/wire.py).
MAX_PROGRESS_MESSAGE_CHARS = 1024

_decode_number = msgspec.json.Decoder(float).decode
_decode_text = msgspec.json.Decoder(str).decode


class ProgressError(ValueError):
    """A `progress` message the bridge refuses; the message says which member is wrong (close 4400)."""


class Report(msgspec.Struct, frozen=True, gc=False):
    """One progress report: how far, out of how much (if known), and a line for a person."""

    progress: float
    total: float | None = None
    message: str | None = None


def _number(raw: msgspec.Raw, member: str) -> float:
    try:
        return _decode_number(raw)
    except msgspec.ValidationError as error:
        if "out of range" in str(error):  # 1e999, say: a JSON number no double holds
            raise ProgressError(f"progress: {member} must be a finite number") from None
        raise ProgressError(f"progress: {member} must be a number") from None


def parse_report(
    progress: msgspec.Raw | msgspec.UnsetType,
    total: msgspec.Raw | msgspec.UnsetType,
    message: msgspec.Raw | msgspec.UnsetType,
) -> Report:
    """The report of a `progress` message's members, each as sent; raises `ProgressError`."""
    if progress is msgspec.UNSET:
        raise ProgressError("progress: progress is missing")
    value = _number(progress, "progress")
    out_of = None if total is msgspec.UNSET else _number(total, "total")
    text = None
    if message is not msgspec.UNSET:
        try:
            text = _decode_text(message)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise ProgressError("progress: message must be a string") from None
        if len(text) > MAX_PROGRESS_MESSAGE_CHARS:
            raise ProgressError(f"progress: message over {MAX_PROGRESS_MESSAGE_CHARS} characters")
    return Report(value, out_of, text)


class Progress:
    """One call's progress toward its agent: its token, when the latest reports went, and the one waiting."""

    __slots__ = ("token", "last", "sent", "pending")

    def __init__(self, token: bytes | None) -> None:
        # The agent's progressToken as JSON; None on an app's instance for a call forwarded from
        # another, whose agent's instance holds the token (docs/scaling.md, Progress and trace context).
        self.token = token
        self.last = -math.inf  # MCP: each notification's progress is greater than the one before
        self.sent: list[float] = []  # when the latest PROGRESS_PER_SECOND reports went, oldest first
        self.pending: Report | None = (
            None  # came while ten had gone within the second; replaced by a later one
        )

    def next_at(self) -> float:
        """When the next report may go: at once, or a second after the oldest of the latest ten."""
        sent = self.sent
        return sent[0] + 1.0 if len(sent) == PROGRESS_PER_SECOND else -math.inf

    def take(self, report: Report, now: float) -> bool:
        """Whether `report` goes now; if it is newer but early, it waits as `pending`; if not newer, it is dropped."""
        if not report.progress > self.last:
            return False
        self.last = report.progress
        if now < self.next_at():
            self.pending = report
            return False
        self.pending = None  # an older one waiting is passed by this one
        self._went(now)
        return True

    def due(self, now: float) -> Report | None:
        """The pending report, if its time has come; it is then sent."""
        report = self.pending
        if report is None or now < self.next_at():
            return None
        self.pending = None
        self._went(now)
        return report

    def flush(self) -> Report | None:
        """The pending report, sent whatever the time: the call is answered next, so it is the last one."""
        report, self.pending = self.pending, None
        return report

    def _went(self, now: float) -> None:
        sent = self.sent
        if len(sent) == PROGRESS_PER_SECOND:
            del sent[0]
        sent.append(now)


def progress_notification(token: bytes, report: Report) -> bytes:
    """`notifications/progress` for an agent (MCP basic/utilities/progress), its token as the agent sent it."""
    params = {"progressToken": msgspec.Raw(token), "progress": report.progress}
    if report.total is not None:
        params["total"] = report.total
    if report.message is not None:
        params["message"] = report.message
    return notification("notifications/progress", encode_json(params))
