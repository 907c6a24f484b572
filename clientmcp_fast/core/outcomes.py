"""How a tools/call ended: one `Outcome` for the counters, the log lines, the metrics and the tool errors.

A tool error is a tool result with `isError: true`, not a protocol error, so that the model
learns why the tool failed and can tell the user (ClientMCP v1 §4.3;
docs/protocol.md, Call outcomes). The labels are the `outcome` of the metrics and the log
lines (docs/operations.md, Metrics; docs/operations.md, Log events).
"""

from __future__ import annotations

from enum import IntEnum


class Outcome(IntEnum):
    """How a call ended: an index into the counters, with its label and its tool error.

    `text` is empty where there is no fixed tool error: the app answered (a result or its own
    tool error), the agent went away, or the text names something of the call (`timed_out`,
    an unknown tool's name). The numbers travel between instances (core/wire.py): a member
    keeps its number, and a new one takes the next.
    """

    label: str
    text: str

    def __new__(cls, value: int, label: str, text: str = "") -> Outcome:
        member = int.__new__(cls, value)
        member._value_ = value
        member.label = label
        member.text = text
        return member

    RESULT = 0, "result"
    TOOL_ERROR = 1, "tool_error"
    OFFLINE = 2, "offline", "The application is not connected: its tools are unavailable until it reconnects."
    NOT_REGISTERED = 3, "not_registered", "The application has not declared its tools yet."
    UNKNOWN_TOOL = 4, "unknown_tool"
    TIMEOUT = 5, "timeout"
    DISCONNECTED = 6, "disconnected", "The application disconnected before answering."
    # The app's connection was replaced by a newer one for its client ID: to the agent, it left.
    REPLACED = 7, "replaced", "The application disconnected before answering."
    CANCELLED = 8, "cancelled"
    BUSY = 9, "busy", "The application is busy; try again."
    TOO_LARGE = 10, "too_large", "The call is too large to deliver (over 4 MiB)."
    SHUTTING_DOWN = 11, "shutting_down", "The bridge is shutting down."


# docs/scaling.md, Apps held elsewhere: past CLIENTMCP_MAX_REMOTE_APPS, an instance does not keep
# an app's tools; a call of them is counted as NOT_REGISTERED, with this text.
TOOLS_NOT_KEPT = (
    "The application is connected to another bridge instance, and this instance holds the tools of "
    "as many such applications as it may: they are unavailable here until that changes."
)


def timed_out(seconds: float) -> str:
    """The tool error of a TIMEOUT: the app did not answer within the call timeout."""
    shown = int(seconds) if seconds == int(seconds) else seconds
    return f"The application did not answer within {shown} s."


def too_large_between_instances(limit: int) -> str:
    """The tool error of a TOO_LARGE call or result over what the cluster's NATS carries (docs/scaling.md)."""
    return f"The call or its answer is too large to pass between bridge instances (over {limit} bytes)."
