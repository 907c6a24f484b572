"""The text of the bridge's log lines, and the `call` lines written once per loop turn.

Compiled (see clientmcp_fast/compiled.py): at `info`, the default level, a line is made
for every call, so its formatting is kept out of the interpreter. clientmcp_fast/log.py
configures the log and writes the other events.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from time import time as _time

from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.bridge import CallLog as BridgeCallLog
from clientmcp_fast.core.counters import OUTCOMES

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
    # From whole microseconds: compiled, two C integers' text costs a fifth of a float's format.
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


# A text line's words after the client ID and tool name, made once: the era's and, by outcome,
# the outcome's and whether the call was streamed.
_LEGACY = " era=legacy seconds="
_MODERN = " era=modern seconds="
_ENDINGS = tuple(f" outcome={outcome} streamed=False\n" for outcome in OUTCOMES)
_STREAMED_ENDINGS = tuple(f" outcome={outcome} streamed=True\n" for outcome in OUTCOMES)


class CallLog(BridgeCallLog):
    """The `call` lines of one loop turn, written together once the turn's other work is done.

    At `info`, the default level, every call has its line. To keep it a small share of the
    call's own work (docs/operations.md, Log events): a line's text is made when its call ends,
    all but its start (the stamp), which the lines of a turn share; each client ID's and tool
    name's text is made once (a memo); and the lines of a turn take one write and one flush.
    """

    __slots__ = ("_schedule", "_stream", "_json", "_pending", "_texts")

    def __init__(self, schedule: Callable[[Callable[[], None]], object], stream, json_lines: bool) -> None:
        self._schedule = schedule  # the loop's call_soon
        self._stream = stream  # a text stream: the log handler's
        self._json = json_lines
        # This turn's lines, each without its start: the stamp (text) or `{"timestamp": "` and
        # the stamp (JSON), the same for every line of the turn, which `flush` puts before each.
        self._pending: list[str] = []
        self._texts: dict[object, str] = {}

    def ended(self, call: object, outcome: int, seconds: float) -> None:
        """A tools/call was answered: its line is written at the end of this turn (unless its `log_line` is false)."""
        if isinstance(call, Context):  # an agent's call, as nearly every one is: compiled, read in C
            context = call
            client_id = context.client_id
            tool = context.tool
            modern = context.modern
            streamed = context.streaming
        else:
            if not getattr(call, "log_line", True):
                return
            client_id = getattr(call, "client_id", None)
            tool = getattr(call, "tool", None)
            modern = getattr(call, "modern", False)
            streamed = getattr(call, "streaming", False)
        if tool is not None and type(tool) is not str:
            tool = tool.name  # a Tool, or the name asked for when there was none
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
                f'"outcome": "{OUTCOMES[outcome]}", "streamed": {"true" if streamed else "false"}}}\n'
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


# How many client IDs and tool names a CallLog keeps the text of.
_MAX_TEXTS = 4096
