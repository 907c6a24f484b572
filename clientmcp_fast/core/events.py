"""The event log: what the core tells of what happened, for the lines an operator reads.

A port, as `Link` and `Exchange` are: the core calls it and never writes a line itself, so it
needs no clock, no stream and no logging. The I/O side's `EventLines`
(clientmcp_fast/net/log_lines.py) makes each event its line of docs/operations.md, Log events,
at that event's level; the tests record the events, or take this base class, which tells
nobody.
"""

from __future__ import annotations


class EventLog:
    """Where the core tells of each event; every method of this base class does nothing.

    A base class rather than a Protocol, so that compiled, the bridge's call per call
    (`call_ended`) is a C call: the I/O side's log derives from it.
    """

    __slots__ = ()

    def call_ended(self, call: object, outcome: int, seconds: float) -> None:
        """A tools/call was answered with `outcome` (an Outcome) after `seconds`; 0 if it never reached an app.

        A call whose `log_line` is false is told too: its line is written by the instance the
        agent reached (a call forwarded through the app directory of a cluster).
        """

    def app_connected(self, client_id: str) -> None:
        """An app's token was accepted: the connection is `client_id`'s."""

    def app_closed(self, client_id: str, code: int, reason: str) -> None:
        """The connection of `client_id`'s app closed, by either side, with `code` and `reason`."""

    def app_refused(self, reason: str) -> None:
        """An app's token was refused (close 4401) for `reason`."""

    def register_refused(self, client_id: str | None, reason: str) -> None:
        """A register was refused (close 4400) for `reason`."""

    def agent_refused(self, reason: int, client_id: str, now: float) -> None:
        """An agent of `client_id` was refused for its token's scope or limits (`reason` in REFUSALS) at `now`."""

    def agent_unauthorized(self, problem: str) -> None:
        """An agent's request was answered 401: it had no token, or `problem` is what is wrong with it."""

    # -- a cluster's app directory (core/directory.py, docs/scaling.md) ---------------------------

    def cluster_message_too_large(self, client_id: object, limit: int) -> None:
        """A message about `client_id` is over the bus's `limit` bytes, and no call could take the failure: not sent."""

    def cluster_message_dropped(self, reason: str, detail: str) -> None:
        """A bus message was not taken for `reason` (DROP_REASONS); the directory says so at most once a minute."""

    def cluster_wire_mismatch(self, instance: object, version: object, ours: int) -> None:
        """`instance` speaks cluster wire `version`, this one `ours`: it is ignored from now on."""

    def cluster_apps_not_kept(self, max_kept: int) -> None:
        """The tools of `max_kept` apps held elsewhere are kept here, no more (--max-remote-apps)."""

    def cluster_stalled(self, seconds: float) -> None:
        """This instance sent no heartbeat for `seconds`: its ties with the others start again."""
