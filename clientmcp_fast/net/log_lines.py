"""The bridge's log lines: their format, written once here, and `EventLines`, the event log the core tells.

Compiled (see clientmcp_fast/compiled.py): at `info`, the default level, a line is made
for every call, so its formatting is kept out of the interpreter. clientmcp_fast/log.py
configures the log, formats the lines of other modules with `event_line` and
`message_line`, and makes the `EventLines` a bridge is given.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from time import time as _time

from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.counters import REFUSALS
from clientmcp_fast.core.events import EventLog
from clientmcp_fast.core.outcomes import Outcome

# A text value is quoted as a JSON string when it is empty or holds a space, a quote, `=`,
# a backslash or a character that is not printable.
_PLAIN = re.compile(r'[^\s"=\\]+')


_plain = _PLAIN.fullmatch


def text_value(value: object) -> str:
    """A field's value in a text line: as it is, or quoted as a JSON string."""
    kind = type(value)
    if kind is float:
        return f"{value:.6f}"  # (a duration: six decimals, as the JSON line rounds it)
    text = value if kind is str else str(value)
    if _plain(text) and text.isprintable():  # type: ignore[arg-type]
        return text  # type: ignore[return-value]
    return json.dumps(text)


def seconds_text(seconds: float) -> str:
    """A call's duration in a text line: seconds to the microsecond, six decimals, as `.6f` writes them."""
    # From whole microseconds: compiled, two C integers' text is much cheaper than a float's format.
    micros = int(seconds * 1_000_000 + 0.5)
    whole = micros // 1_000_000
    fraction = micros - whole * 1_000_000
    return f"{whole}.{fraction:06d}"


_second = -1
_prefix = ""
_MILLIS = tuple(f".{milli:03d}Z" for milli in range(1000))  # a line's end of stamp, made once


def stamp(now: float) -> str:
    """A line's timestamp: UTC, to the millisecond; the date and time are made once a second."""
    global _second, _prefix
    millis = int(now * 1000)
    second = millis // 1000
    if second != _second:
        _second = second
        _prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return _prefix + _MILLIS[millis - second * 1000]


LEVEL_NAMES = {logging.ERROR: "error", logging.WARNING: "warn", logging.INFO: "info", logging.DEBUG: "debug"}


def event_line(when: str, level: str, name: str, fields: dict, json_lines: bool) -> str:
    """The line of the event `name` and its fields, without its newline (docs/operations.md, Log events)."""
    if json_lines:
        return json.dumps(
            {"timestamp": when, "level": level, "event": name, **fields}, ensure_ascii=False, default=str
        )
    return " ".join([when, level, name, *[f"{field}={text_value(value)}" for field, value in fields.items()]])


def message_line(when: str, level: str, text: str, json_lines: bool) -> str:
    """The line of a message that is no event, without its newline: in JSON, the event `message`."""
    if json_lines:
        return json.dumps(
            {"timestamp": when, "level": level, "event": "message", "message": text}, ensure_ascii=False
        )
    return f"{when} {level} {text}"


# A `call` text line's words after the client ID and tool name, made once: the era's and, by
# outcome, the outcome's and whether the call was streamed. `event_line` is the format they
# keep to (tests/net/test_log_lines.py compares them for every outcome).
_LEGACY = " era=legacy seconds="
_MODERN = " era=modern seconds="
_ENDINGS = tuple(f" outcome={outcome.label} streamed=False\n" for outcome in Outcome)
_STREAMED_ENDINGS = tuple(f" outcome={outcome.label} streamed=True\n" for outcome in Outcome)
# The labels by number: compiled, the bridge tells an outcome as a C integer, no longer an Outcome.
_LABELS = tuple(outcome.label for outcome in Outcome)

# An agent over its limits may be refused thousands of times a second: its lines are bounded.
REFUSAL_LINE_EVERY_SECONDS = 10.0


class EventLines(EventLog):
    """The events the core tells of, each as its line of docs/operations.md, Log events, at its level.

    With `stream`, the stream of the log's one handler when the bridge set it (clientmcp_fast/log.py,
    `configure`), the lines are written to it directly: a loop turn's `call` lines together once
    the turn's other work is done (through `schedule`, the loop's call_soon), every other line at
    once. Without it (handlers an embedding program set), each event is a record of `logger` at
    once, its name and fields apart, for those handlers to format. Which events have a line is
    decided here alone, whichever way it is written: a call not `logged` here has none.
    The level is `logger`'s when the log is made.

    At `info`, every call has its line. To keep it a small share of the call's own work
    (docs/operations.md, Log events): a line's text is made when its call ends, all but its
    start (the stamp), which the lines of a turn share; each client ID's and tool name's text is
    made once (a memo); and the lines of a turn take one write and one flush.
    """

    __slots__ = (
        "_logger",
        "_level",
        "_calls",
        "_schedule",
        "_stream",
        "_json",
        "_pending",
        "_texts",
        "_next_refusal_line_at",
        "_not_logged",
    )

    def __init__(
        self,
        logger: logging.Logger,
        schedule: Callable[[Callable[[], None]], object],
        stream=None,
        json_lines: bool = False,
    ) -> None:
        self._logger = logger
        self._level = logger.getEffectiveLevel()
        self._calls = self._level <= logging.INFO  # a line per call at `info` and `debug`
        self._schedule = schedule
        self._stream = stream  # a text stream, or None: records of `logger`
        self._json = json_lines
        # This turn's `call` lines, each without its start: the stamp (text) or `{"timestamp": "`
        # and the stamp (JSON), the same for every line of the turn, which `flush` puts before each.
        self._pending: list[str] = []
        self._texts: dict[object, str] = {}
        self._next_refusal_line_at = [-math.inf] * len(REFUSALS)
        self._not_logged = [0] * len(REFUSALS)

    # -- calls ------------------------------------------------------------------------------

    def call_ended(self, call: Call, outcome: int, seconds: float) -> None:
        """A tools/call was answered: its line is written at the end of this turn (unless it is not `logged` here)."""
        if not self._calls:
            return
        ended: Call = call  # compiled, its fields are read in C
        if not ended.logged:
            return
        client_id = ended.client_id
        tool = ended.tool
        modern = ended.modern
        streamed = ended.streaming
        if tool is not None and type(tool) is not str:
            tool = tool.name  # a Tool, or the name asked for when there was none
        if self._stream is None:
            self._record(
                logging.INFO,
                "call",
                {
                    "client_id": client_id,
                    "tool": tool,
                    "era": "modern" if modern else "legacy",
                    "seconds": round(seconds, 6),
                    "outcome": _LABELS[outcome],
                    "streamed": bool(streamed),
                },
            )
            return
        texts = self._texts
        who = texts.get(client_id)
        if who is None:
            who = self._text(client_id)
        what = texts.get(tool)
        if what is None:
            what = self._text(tool)
        pending = self._pending
        if not pending:
            self._schedule(self.flush)
        if self._json:
            pending.append(
                f'", "level": "info", "event": "call", "client_id": {who}, "tool": {what}, '
                f'"era": "{"modern" if modern else "legacy"}", "seconds": {round(seconds, 6)!r}, '
                f'"outcome": "{_LABELS[outcome]}", "streamed": {"true" if streamed else "false"}}}\n'
            )
        else:
            ending = (_STREAMED_ENDINGS if streamed else _ENDINGS)[outcome]
            pending.append(
                f" info call client_id={who} tool={what}{_MODERN if modern else _LEGACY}"
                f"{seconds_text(seconds)}{ending}"
            )

    def flush(self) -> None:
        """Write the lines of the calls ended since the last flush (never their arguments, results or tokens)."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        start = stamp(_time())
        if self._json:
            start = '{"timestamp": "' + start
        stream = self._stream
        stream.write(start + start.join(pending))  # each line after its start, in one write
        stream.flush()

    def _text(self, value: object) -> str:
        """A client ID's or tool name's text in a line, made once and kept."""
        texts = self._texts
        if len(texts) >= _MAX_TEXTS:
            texts.clear()  # IDs and names are chosen by clients: the memo stays bounded
        text = texts[value] = json.dumps(value, ensure_ascii=False) if self._json else text_value(value)
        return text

    # -- apps and agents --------------------------------------------------------------------

    def app_connected(self, client_id: str) -> None:
        """An `app_connected` line (info)."""
        self._event(logging.INFO, "app_connected", {"client_id": client_id})

    def app_closed(self, client_id: str, code: int, reason: str) -> None:
        """An `app_closed` line (info)."""
        self._event(logging.INFO, "app_closed", {"client_id": client_id, "code": code, "reason": reason})

    def app_refused(self, reason: str) -> None:
        """An `app_refused` line (warn)."""
        self._event(logging.WARNING, "app_refused", {"reason": reason})

    def register_refused(self, client_id: str | None, reason: str) -> None:
        """A `register_refused` line (info)."""
        self._event(logging.INFO, "register_refused", {"client_id": client_id, "reason": reason})

    def agent_refused(self, reason: int, client_id: str, now: float) -> None:
        """An `agent_refused` line (info), at most one per reason every 10 s; those between counted in the next."""
        if self._level > logging.INFO:
            return
        if now < self._next_refusal_line_at[reason]:
            self._not_logged[reason] += 1
            return
        self._next_refusal_line_at[reason] = now + REFUSAL_LINE_EVERY_SECONDS
        not_logged, self._not_logged[reason] = self._not_logged[reason], 0
        self._event(
            logging.INFO,
            "agent_refused",
            {"reason": REFUSALS[reason], "client_id": client_id, "not_logged": not_logged},
        )

    def agent_unauthorized(self, problem: str) -> None:
        """A line at `debug` saying why an agent got 401."""
        self._message(logging.DEBUG, f"agent refused: {problem}")

    # -- a cluster's app directory (docs/scaling.md) ----------------------------------------

    def cluster_message_too_large(self, client_id: object, limit: int) -> None:
        """A warning: a message over the bus's limit was not sent."""
        self._message(
            logging.WARNING, f"cluster: a message about {client_id!r} is over {limit} bytes: not sent"
        )

    def cluster_message_dropped(self, reason: str, detail: str) -> None:
        """A warning: a bus message was not taken, and why."""
        self._message(
            logging.WARNING,
            f"cluster: dropped a bus message ({reason}{': ' + detail if detail else ''}); counted in "
            "clientmcp_cluster_messages_dropped_total, said at most once a minute per reason "
            "(docs/scaling.md, Threat model)",
        )

    def cluster_wire_mismatch(self, instance: object, version: object, ours: int) -> None:
        """A warning: an instance of another cluster wire version is ignored."""
        self._message(
            logging.WARNING,
            f"cluster: instance {instance} speaks cluster wire version {version!r}, this one {ours}: it is "
            "ignored and its apps are not reachable from here; a cluster runs one wire version "
            "(docs/scaling.md, Upgrades)",
        )

    def cluster_apps_not_kept(self, max_kept: int) -> None:
        """A warning: the bound of apps held elsewhere whose tools are kept here is reached."""
        self._message(
            logging.WARNING,
            f"cluster: this instance keeps the tools of {max_kept} apps held elsewhere (--max-remote-apps); "
            "agents here get a tool error for the others",
        )

    def cluster_stalled(self, seconds: float) -> None:
        """A warning: this instance's heartbeats stopped, so it joins the others again."""
        self._message(
            logging.WARNING,
            f"cluster: this instance sent no heartbeat for {seconds:.1f} s (its event loop stalled?): the "
            "others may have taken it as gone, so its calls between instances end and it joins again",
        )

    def io_event(self, level: int, name: str, **fields: object) -> None:
        """An event of the I/O layer, which the core does not tell of (an OAuth refusal, say): its line."""
        self._event(level, name, fields)

    # -- writing ----------------------------------------------------------------------------

    def _event(self, level: int, name: str, fields: dict) -> None:
        """The line of an event other than a call, at once, if the level lets it through."""
        if level < self._level:
            return
        stream = self._stream
        if stream is None:
            self._record(level, name, fields)
            return
        stream.write(event_line(stamp(_time()), LEVEL_NAMES[level], name, fields, self._json) + "\n")
        stream.flush()

    def _message(self, level: int, text: str) -> None:
        """The line of a message that is no event, at once, if the level lets it through."""
        if level < self._level:
            return
        stream = self._stream
        if stream is None:
            self._logger.log(level, text)
            return
        stream.write(message_line(stamp(_time()), LEVEL_NAMES[level], text, self._json) + "\n")
        stream.flush()

    def _record(self, level: int, name: str, fields: dict) -> None:
        """An event as a record of the logger, for handlers the bridge did not set."""
        self._logger.log(level, name, extra={"event": name, "fields": fields})


# How many client IDs and tool names an EventLines keeps the text of.
_MAX_TEXTS = 4096
