"""The tool errors an agent gets when a call cannot be answered by the app (docs/protocol.md, Call outcomes).

They are tool results with `isError: true`, not protocol errors, so that the model
learns why the tool failed and can tell the user (ClientMCP v1 §4.3).
"""

OFFLINE = "The application is not connected: its tools are unavailable until it reconnects."
NOT_REGISTERED = "The application has not declared its tools yet."
TOO_LARGE = "The call is too large to deliver (over 4 MiB)."
DISCONNECTED = "The application disconnected before answering."
BUSY = "The application is busy; try again."
SHUTTING_DOWN = "The bridge is shutting down."
# docs/scaling.md, Apps held elsewhere: past CLIENTMCP_MAX_REMOTE_APPS, an instance does not keep an app's tools.
TOOLS_NOT_KEPT = (
    "The application is connected to another bridge instance, and this instance holds the tools of "
    "as many such applications as it may: they are unavailable here until that changes."
)


def timed_out(seconds: float) -> str:
    """The tool error for a call the app did not answer within the call timeout."""
    shown = int(seconds) if seconds == int(seconds) else seconds
    return f"The application did not answer within {shown} s."


def too_large_between_instances(limit: int) -> str:
    """The tool error for a call or result larger than the cluster's NATS carries (docs/scaling.md)."""
    return f"The call or its answer is too large to pass between bridge instances (over {limit} bytes)."
