"""Authorization requests waiting for their app's consent and their person's code (docs/oauth.md, The consent step).

A request is opened when the consent page is shown: the app is sent `authorize` with a code
of 8 characters, which the person types into the page. Both are needed: the app's
`allow: true` and the right code. `allow: false`, a wrong code 5 times, or 10 minutes
without an answer end it. Requests live in the memory of the process that showed the page,
bounded (docs/limits.md); sans-I/O: `now` and the randomness come in.

In a cluster the page and the app may be on two instances
(docs/scaling.md, Consent across instances): the page's instance keeps the request and checks
the code, as for an app of its own; the app's instance keeps a `Relayed` entry, which says
where the app's answer goes, in the same memory and within the same bounds.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clientmcp_fast.core.apps import App
    from clientmcp_fast.core.oauth import AuthorizeRequest

# Upper-case letters and digits without the ones read as another (0/O, 1/I/L): 31 symbols,
# so 8 of them are about 40 bits, and 5 guesses find one in 10^11.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
MAX_ATTEMPTS = 5
WAIT_SECONDS = 600  # core/oauth.py's REQUEST_SECONDS: the signed request lives as long
MAX_REQUESTS = 1000  # in this process
MAX_REQUESTS_PER_APP = 8  # a stranger flooding the page fills this app's share, not everyone's

# Why an app cannot be asked, as the page says it ("<app> cannot be authorized this way: ...").
NOT_CONNECTED = "it is not connected to this bridge"
NOT_ASKING = "the app does not ask its user for consent (it did not register with consent: true)"
EARLIER_RELEASE = (
    "it is connected to an instance of an earlier release, which cannot ask it for another instance's page"
)
FORGOTTEN = "its instance had too many requests waiting and forgot this one"


def too_many_waiting(max_per_app: int) -> str:
    """Why the app's instance did not ask it: its share of waiting requests is full."""
    return (
        f"{max_per_app} requests wait for its user's answer already; answer them or let them end (10 minutes)"
    )


# What a wrong code does to its request.
WRONG = 0
ENDED = 1

_BYTE_LIMIT = 256 - 256 % len(CODE_ALPHABET)  # bytes at or above it would favour the first symbols


def new_code(random: Callable[[int], bytes]) -> str:
    """A code of 8 symbols of CODE_ALPHABET, each equally likely; `random(n)` gives n random bytes."""
    symbols: list[str] = []
    while len(symbols) < CODE_LENGTH:
        for byte in random(CODE_LENGTH * 2):
            if byte < _BYTE_LIMIT and len(symbols) < CODE_LENGTH:
                symbols.append(CODE_ALPHABET[byte % len(CODE_ALPHABET)])
    return "".join(symbols)


def typed_code(text: str) -> str:
    """A code as the person typed it, the way the app's is written: upper case, no space or hyphen."""
    return "".join(text.split()).replace("-", "").upper()


class Consent:
    """One request waiting: the app asked, its code, the attempts, and the app's answer once it came."""

    __slots__ = ("request", "app", "code", "deadline", "attempts", "allow", "problem", "waiter")

    def __init__(self, request: AuthorizeRequest, app: App, code: str, deadline: float) -> None:
        self.request = request
        self.app = app  # the connection that was asked: only its answer counts
        self.code = code
        self.deadline = deadline
        self.attempts = 0  # wrong codes typed
        self.allow: bool | None = None  # the app's answer, None until it comes
        # Why the app could not be asked after all, told by its instance (an app elsewhere
        # that went away or stopped asking before the `authorize` reached it); `allow` is False.
        self.problem: str | None = None
        # Called once with this request when the app answers, while the page's form waits
        # for it (net/oauth.py); None otherwise.
        self.waiter: Callable[[Consent], None] | None = None

    def code_is(self, typed: str) -> bool:
        """Whether `typed` is this request's code, as the person may have typed it."""
        return hmac.compare_digest(typed_code(typed).encode(), self.code.encode())

    def wrong_code(self) -> int:
        """Count a wrong code: WRONG while attempts are left, ENDED at the 5th."""
        self.attempts += 1
        return ENDED if self.attempts >= MAX_ATTEMPTS else WRONG


# Where a relayed request's end goes: (the app's answer, None), or (False, why it was not answered).
Reply = Callable[[bool, str | None], None]


class Relayed:
    """An `authorize` sent to an app of this process for another instance's page: where the answer goes."""

    __slots__ = ("id", "app_id", "app", "deadline", "reply")

    def __init__(self, request_id: str, app_id: str, app: App, deadline: float, reply: Reply) -> None:
        self.id = request_id
        self.app_id = app_id
        self.app = app  # the connection that was asked: only its answer counts
        self.deadline = deadline
        self.reply = reply


class ConsentRequests:
    """The requests this process showed a consent page for, by request ID, until answered or 10 minutes.

    And the requests relayed to an app of this process for another instance's page, which
    share the bounds: 8 per app, whichever instance showed the page, and 1,000 in all.
    """

    __slots__ = ("_waiting", "_relayed", "_per_app", "max_requests", "max_per_app", "forgotten", "answers")

    def __init__(self, max_requests: int = MAX_REQUESTS, max_per_app: int = MAX_REQUESTS_PER_APP) -> None:
        self._waiting: dict[str, Consent] = {}  # in the order opened, so by deadline
        self._relayed: dict[str, Relayed] = {}  # the same
        self._per_app: dict[str, int] = {}
        self.max_requests = max_requests
        self.max_per_app = max_per_app
        self.forgotten = 0  # requests dropped for the process bound before their 10 minutes
        # The apps' answers that found their request, counted on the app's instance.
        self.answers = {"allow": 0, "deny": 0}

    def __len__(self) -> int:
        return len(self._waiting) + len(self._relayed)

    def _expire(self, now: float) -> None:
        waiting = self._waiting
        while waiting:
            consent = next(iter(waiting.values()))
            if consent.deadline > now:
                break
            self.end(consent)
        relayed = self._relayed
        while relayed:
            entry = next(iter(relayed.values()))
            if entry.deadline > now:
                break
            self.end_relayed(entry)

    def _room(self, app_id: str, now: float) -> bool:
        """Whether `app_id` may have one more request waiting; past the process bound, the oldest is forgotten."""
        self._expire(now)
        if self._per_app.get(app_id, 0) >= self.max_per_app:
            return False
        if len(self) >= self.max_requests:
            waiting, relayed = self._waiting, self._relayed
            oldest = next(iter(waiting.values())) if waiting else None
            other = next(iter(relayed.values())) if relayed else None
            if oldest is not None and (other is None or oldest.deadline <= other.deadline):
                self.end(oldest)
            else:
                assert other is not None
                self.end_relayed(other)
                other.reply(False, FORGOTTEN)  # the page's instance would wait for it in vain
            self.forgotten += 1
        self._per_app[app_id] = self._per_app.get(app_id, 0) + 1
        return True

    def _release(self, app_id: str) -> None:
        left = self._per_app[app_id] - 1
        if left:
            self._per_app[app_id] = left
        else:
            del self._per_app[app_id]

    def open(self, request: AuthorizeRequest, app: App, code: str, now: float) -> Consent | None:
        """Wait for the app's answer to `request` (its `id` set); None when the app has too many waiting."""
        if not self._room(request.app_id, now):
            return None
        consent = Consent(request, app, code, now + WAIT_SECONDS)
        self._waiting[request.id] = consent
        return consent

    def relay(self, request_id: str, app_id: str, app: App, reply: Reply, now: float) -> Relayed | None:
        """Wait for `app`'s answer to another instance's request; None when the app has too many waiting.

        `reply` is called once: with the app's answer, or if the request is forgotten for the
        process bound. Send the app `authorize` after this.
        """
        if request_id in self._waiting or request_id in self._relayed or not self._room(app_id, now):
            return None
        relayed = Relayed(request_id, app_id, app, now + WAIT_SECONDS, reply)
        self._relayed[request_id] = relayed
        return relayed

    def end_relayed(self, relayed: Relayed) -> None:
        """A relayed request is over (answered, not asked, expired): its answer goes nowhere now."""
        if self._relayed.get(relayed.id) is relayed:
            del self._relayed[relayed.id]
            self._release(relayed.app_id)

    def get(self, request_id: str, now: float) -> Consent | None:
        """The request waiting under `request_id`, or None: ended, expired, or shown by another process."""
        self._expire(now)
        return self._waiting.get(request_id)

    def end(self, consent: Consent) -> None:
        """The request is over, however it ended: it waits no more."""
        request = consent.request
        if self._waiting.get(request.id) is not consent:
            return
        del self._waiting[request.id]
        self._release(request.app_id)
        consent.waiter = None

    def answered(self, app: App, request_id: str, allow: bool, now: float) -> None:
        """The app `app` answered `consent`; an unknown id, another app's or a second answer is ignored."""
        consent = self.get(request_id, now)
        if consent is None:
            relayed = self._relayed.get(request_id)
            if relayed is not None and relayed.app is app:
                self.end_relayed(relayed)
                self.answers["allow" if allow else "deny"] += 1
                relayed.reply(allow, None)
            return
        if consent.app is not app or consent.allow is not None:
            return
        self.answers["allow" if allow else "deny"] += 1
        self.heard(consent, allow, None)

    def heard(self, consent: Consent, allow: bool, problem: str | None) -> None:
        """The app's answer reached `consent`, or why it cannot be asked (`problem`); only the first counts."""
        if consent.allow is not None or self._waiting.get(consent.request.id) is not consent:
            return
        consent.allow = allow and problem is None
        consent.problem = problem
        waiter = consent.waiter
        if waiter is not None:
            consent.waiter = None
            waiter(consent)
