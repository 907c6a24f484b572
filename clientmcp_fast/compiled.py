"""The modules built as C extensions: the one list that setup.py builds and the package checks.

`HOT_PATHS` are Cython sources, `_speedups/NAME.pyx` with the `.pxd` beside it, each with a
pure-Python twin `_pure/NAME.py` that `speedups` selects when they are not built. `TYPED` are
plain `.py` modules compiled from themselves, typed by the `.pxd` beside each (Cython's pure
Python mode); the very same `.py` runs interpreted with CLIENTMCP_NO_EXTENSIONS=1.
A test checks this list against the `.pyx` and `.pxd` files in the package.
"""

HOT_PATHS = ("frames", "routing", "http_reader", "splice")

TYPED = (
    "core.memo",
    "core.counters",
    "core.events",
    "core.http",
    "core.jsonrpc",
    "core.tokens",
    "core.calls",
    "core.tracing",
    "core.bridge",
    "core.channel",
    "core.websocket",
    "core.agent_streams",
    "core.agent_context",
    "core.agent_checks",
    "core.agent_tools",
    "core.agent_modern",
    "core.agent_legacy",
    "core.agent",
    "net.http",
    "net.websocket",
    "net.log_lines",
)
