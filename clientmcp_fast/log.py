"""One line per event on stderr, at the level of CLIENTMCP_LOG; tokens never reach a log line.

Events of docs/operations.md (a call, an app connecting or closing, a refused register)
carry their fields apart from the text: `--log-format text` writes them as `name=value`
after the event's name, `--log-format json` as one JSON object per line. The core tells of
them through its event log (core/events.py): `event_log` makes the one a bridge is given.
The lines' format is clientmcp_fast/net/log_lines.py's.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from clientmcp_fast._pure.routing import origin_form
from clientmcp_fast.net.log_lines import EventLines, event_line, message_line

logger = logging.getLogger("clientmcp")
# Read on hot paths instead of logger.isEnabledFor(DEBUG); kept in step by configure().
debug_enabled = False

LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


def _level_name(record: logging.LogRecord) -> str:
    return {"WARNING": "warn"}.get(record.levelname, record.levelname.lower())


class _LineFormatter(logging.Formatter):
    converter = time.gmtime
    json_lines = False

    def stamp(self, record: logging.LogRecord) -> str:
        return f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        if fields:
            name = getattr(record, "event", None) or record.getMessage()
            return event_line(self.stamp(record), _level_name(record), name, fields, self.json_lines)
        return message_line(self.stamp(record), _level_name(record), record.getMessage(), self.json_lines)


class _JsonFormatter(_LineFormatter):
    json_lines = True


# The handler configure() set, whose stream the event log writes to directly; None until then.
_handler: logging.StreamHandler | None = None
_json_lines = False


def configure(level: str, stream=None, format: str = "text") -> None:
    """Send the bridge's events to `stream` (stderr) at `level` (error, warn, info, debug), as text or JSON."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JsonFormatter() if format == "json" else _LineFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(LEVELS[level])
    logger.propagate = False
    global debug_enabled, _handler, _json_lines
    debug_enabled = level == "debug"
    _handler = handler
    _json_lines = format == "json"


def event_log(schedule: Callable[[Callable[[], None]], object]) -> EventLines:
    """The event log a bridge is given (`schedule`: the loop's call_soon), at the log's level as it is now.

    When configure() set the log's one handler, the lines go straight to its stream; with
    handlers set by someone else (an embedding program), each event is a record for them.
    """
    handlers = logger.handlers
    if _handler is not None and len(handlers) == 1 and handlers[0] is _handler:
        return EventLines(logger, schedule, _handler.stream, _json_lines)
    return EventLines(logger, schedule)


def redact_target(target: bytes) -> str:
    """A request target fit for a log line: the token of `/mcp/<token>` is replaced."""
    path = origin_form(target).split(b"?", 1)[0]  # `http://host/mcp/<token>` holds a token too
    if path.startswith(b"/mcp/"):
        return "/mcp/<redacted>"
    return path.decode("latin-1")
