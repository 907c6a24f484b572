"""One line per event on stderr, at the level of CLIENTMCP_LOG; tokens never reach a log line."""

from __future__ import annotations

import logging
import sys
import time

from clientmcp_fast._pure.routing import origin_form

logger = logging.getLogger("clientmcp")
# Read on hot paths instead of logger.isEnabledFor(DEBUG); kept in step by configure().
debug_enabled = False

LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


class _LineFormatter(logging.Formatter):
    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        stamp = self.formatTime(record, "%Y-%m-%dT%H:%M:%S")
        level = {"WARNING": "warn"}.get(record.levelname, record.levelname.lower())
        return f"{stamp}.{int(record.msecs):03d}Z {level} {record.getMessage()}"


def configure(level: str, stream=None) -> None:
    """Send the bridge's events to `stream` (stderr) at `level` (error, warn, info, debug)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_LineFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(LEVELS[level])
    logger.propagate = False
    global debug_enabled
    debug_enabled = level == "debug"


def redact_target(target: bytes) -> str:
    """A request target fit for a log line: the token of `/mcp/<token>` is replaced."""
    path = origin_form(target).split(b"?", 1)[0]  # `http://host/mcp/<token>` holds a token too
    if path.startswith(b"/mcp/"):
        return "/mcp/<redacted>"
    return path.decode("latin-1")
