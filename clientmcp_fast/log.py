"""One line per event on stderr, at the level of CLIENTMCP_LOG; tokens never reach a log line.

Events of docs/operations.md (a call, an app connecting or closing, a refused register)
carry their fields apart from the text: `--log-format text` writes them as `name=value`
after the event's name, `--log-format json` as one JSON object per line.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable

from clientmcp_fast._pure.routing import origin_form
from clientmcp_fast.core.bridge import CallLog as BridgeCallLog
from clientmcp_fast.core.bridge import RefusalLog
from clientmcp_fast.core.counters import OUTCOMES, REFUSALS
from clientmcp_fast.net.log_lines import CallLog, stamp, text_value

logger = logging.getLogger("clientmcp")
# Read on hot paths instead of logger.isEnabledFor(DEBUG); kept in step by configure().
debug_enabled = False

LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
FORMATS = ("text", "json")


def _level_name(record: logging.LogRecord) -> str:
    return {"WARNING": "warn"}.get(record.levelname, record.levelname.lower())


class _LineFormatter(logging.Formatter):
    converter = time.gmtime

    def stamp(self, record: logging.LogRecord) -> str:
        return f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        text = record.getMessage()
        if fields:
            text += " " + " ".join(f"{name}={text_value(value)}" for name, value in fields.items())
        return f"{self.stamp(record)} {_level_name(record)} {text}"


class _JsonFormatter(_LineFormatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "timestamp": self.stamp(record),
            "level": _level_name(record),
            "event": getattr(record, "event", None) or "message",
        }
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        return json.dumps(line, ensure_ascii=False, default=str)


class _EventWriter:
    """Writes an event's line straight to the handler's stream, as its formatter would.

    An event is written per call at `info`, the default level: through the logging module,
    a record, its formatter and its time formatting cost three times the call's own work.
    """

    def __init__(self, handler: logging.StreamHandler, json_lines: bool) -> None:
        self.handler = handler
        self.json_lines = json_lines

    def write(self, level: int, name: str, fields: dict[str, object]) -> None:
        when = stamp(time.time())
        level_name = _LEVEL_NAMES[level]
        if self.json_lines:
            line = json.dumps(
                {"timestamp": when, "level": level_name, "event": name, **fields},
                ensure_ascii=False,
                default=str,
            )
        else:
            line = f"{when} {level_name} {name} " + " ".join(
                [f"{field}={text_value(value)}" for field, value in fields.items()]
            )
        stream = self.handler.stream
        stream.write(line + "\n")
        stream.flush()


_LEVEL_NAMES = {logging.ERROR: "error", logging.WARNING: "warn", logging.INFO: "info", logging.DEBUG: "debug"}
# Set by configure(); None (the logging module is used) until then, or when handlers were changed.
_writer: _EventWriter | None = None


def configure(level: str, stream=None, format: str = "text") -> None:
    """Send the bridge's events to `stream` (stderr) at `level` (error, warn, info, debug), as text or JSON."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JsonFormatter() if format == "json" else _LineFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(LEVELS[level])
    logger.propagate = False
    global debug_enabled, _writer
    debug_enabled = level == "debug"
    _writer = _EventWriter(handler, format == "json")


def event(level: int, name: str, **fields: object) -> None:
    """Log the event `name` with its fields (docs/operations.md, Log events)."""
    if logger.isEnabledFor(level):
        writer = _writer
        handlers = logger.handlers
        if writer is not None and len(handlers) == 1 and handlers[0] is writer.handler:
            writer.write(level, name, fields)
        else:
            logger.log(level, name, extra={"event": name, "fields": fields})


def call_log(schedule: Callable[[Callable[[], None]], object]) -> CallLog | _CallRecords | None:
    """What the bridge tells of each finished call (through `schedule`, the loop's call_soon), or None below `info`."""
    if not logger.isEnabledFor(logging.INFO):
        return None
    writer = _writer
    handlers = logger.handlers
    if writer is not None and len(handlers) == 1 and handlers[0] is writer.handler:
        return CallLog(schedule, writer.handler.stream, writer.json_lines)
    return _CallRecords()  # handlers set by someone else: a record per line, as event() makes


class _CallRecords(BridgeCallLog):
    """The `call` events as logging records, for handlers the bridge did not set (an embedding program's)."""

    def ended(self, call: object, outcome: int, seconds: float) -> None:
        """A tools/call was answered: its record now."""
        tool = getattr(call, "tool", None)
        event(
            logging.INFO,
            "call",
            client_id=getattr(call, "client_id", None),
            tool=tool if tool is None or tool.__class__ is str else tool.name,
            era="modern" if getattr(call, "modern", False) else "legacy",
            seconds=round(seconds, 6),
            outcome=OUTCOMES[outcome],
            streamed=bool(getattr(call, "streaming", False)),
        )

    def flush(self) -> None:
        """Nothing is held back."""


# An agent over its limits may be refused thousands of times a second: its lines are bounded.
REFUSAL_LINE_EVERY_SECONDS = 10.0


def refusal_log() -> RefusalLines | None:
    """What the bridge tells of each agent refused for its token's scope or limits, or None below `info`."""
    return RefusalLines() if logger.isEnabledFor(logging.INFO) else None


class RefusalLines(RefusalLog):
    """An `agent_refused` line per refusal, at most one per reason every 10 s; those between counted in the next."""

    def __init__(self) -> None:
        self._next_line_at = [-math.inf] * len(REFUSALS)
        self._not_logged = [0] * len(REFUSALS)

    def refused(self, reason: int, client_id: str, now: float) -> None:
        """An agent of `client_id` was refused for `reason` at `now` (the loop's clock)."""
        if now < self._next_line_at[reason]:
            self._not_logged[reason] += 1
            return
        self._next_line_at[reason] = now + REFUSAL_LINE_EVERY_SECONDS
        not_logged, self._not_logged[reason] = self._not_logged[reason], 0
        event(
            logging.INFO, "agent_refused", reason=REFUSALS[reason], client_id=client_id, not_logged=not_logged
        )


def redact_target(target: bytes) -> str:
    """A request target fit for a log line: the token of `/mcp/<token>` is replaced."""
    path = origin_form(target).split(b"?", 1)[0]  # `http://host/mcp/<token>` holds a token too
    if path.startswith(b"/mcp/"):
        return "/mcp/<redacted>"
    return path.decode("latin-1")
