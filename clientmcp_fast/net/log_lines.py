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
    second, milli = divmod(int(now * 1000), 1000)
    if second != _second:
        _second = second
        _prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return _prefix + _MILLIS[milli]


class CallLog:
    """The `call` lines of one loop turn, written together once the turn's other work is done.

    At `info`, the default level, every call has its line: one write and one flush per turn
    rather than per call, and each client ID's and tool name's text made once (a memo), keep
    it a small share of the call's own work (docs/operations.md, Log events).
    """

    __slots__ = ("_schedule", "_stream", "_json", "_pending", "_texts")

    def __init__(self, schedule: Callable[[Callable[[], None]], object], stream, json_lines: bool) -> None:
        self._schedule = schedule  # the loop's call_soon
        self._stream = stream  # a text stream: the log handler's
        self._json = json_lines
        self._pending: list[tuple] = []
        self._texts: dict[object, str] = {}

    def ended(self, call: object, outcome: int, seconds: float) -> None:
        """A tools/call was answered: its line is written at the end of this turn (unless its `log_line` is false)."""
        if not getattr(call, "log_line", True):
            return
        pending = self._pending
        if not pending:
            self._schedule(self.flush)
        tool = getattr(call, "tool", None)  # a Tool, or the name asked for when there was none
        pending.append((
            getattr(call, "client_id", None),
            tool if tool is None or tool.__class__ is str else tool.name,
            getattr(call, "modern", False),
            seconds,
            outcome,
            getattr(call, "streaming", False),
        ))  # fmt: skip

    def flush(self) -> None:
        """Write the lines of the calls ended since the last flush (never their arguments, results or tokens)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        when = stamp(time.time())
        known, text = self._texts.get, self._text  # known: never an empty text, so `or` reads it
        json_lines = self._json
        lines = []
        for client_id, tool, modern, seconds, outcome, streamed in pending:
            who = known(client_id) or text(client_id)
            what = known(tool) or text(tool)
            era = "modern" if modern else "legacy"
            if json_lines:
                lines.append(
                    f'{{"timestamp": "{when}", "level": "info", "event": "call", "client_id": {who}, '
                    f'"tool": {what}, "era": "{era}", "seconds": {round(seconds, 6)!r}, '
                    f'"outcome": "{OUTCOMES[outcome]}", "streamed": {"true" if streamed else "false"}}}\n'
                )
            else:
                lines.append(
                    f"{when} info call client_id={who} tool={what} era={era} seconds={seconds_text(seconds)} "
                    f"outcome={OUTCOMES[outcome]} streamed={'True' if streamed else 'False'}\n"
                )
        stream = self._stream
        stream.write("".join(lines))
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
