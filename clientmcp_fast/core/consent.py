"""Authorization requests waiting for their app's consent and their person's code (docs/oauth.md, The consent step).

A request is opened when the consent page is shown: the app is sent `authorize` with a code
of 8 characters, which the person types into the page. Both are needed: the app's
`allow: true` and the right code. `allow: false`, a wrong code 5 times, or 10 minutes
without an answer end it. Requests live in the memory of the process that showed the page,
bounded (docs/limits.md); sans-I/O: `now` and the randomness come in.
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

    __slots__ = ("request", "app", "code", "deadline", "attempts", "allow", "waiter")

    def __init__(self, request: AuthorizeRequest, app: App, code: str, deadline: float) -> None:
        self.request = request
        self.app = app  # the connection that was asked: only its answer counts
        self.code = code
        self.deadline = deadline
        self.attempts = 0  # wrong codes typed
        self.allow: bool | None = None  # the app's answer, None until it comes
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


class ConsentRequests:
    """The requests this process showed a consent page for, by request ID, until answered or 10 minutes."""

    __slots__ = ("_waiting", "_per_app", "max_requests", "max_per_app", "forgotten", "answers")

    def __init__(self, max_requests: int = MAX_REQUESTS, max_per_app: int = MAX_REQUESTS_PER_APP) -> None:
        self._waiting: dict[str, Consent] = {}  # in the order opened, so by deadline
        self._per_app: dict[str, int] = {}
        self.max_requests = max_requests
        self.max_per_app = max_per_app
        self.forgotten = 0  # requests dropped for the process bound before their 10 minutes
        self.answers = {"allow": 0, "deny": 0}  # the apps' answers that found their request

    def __len__(self) -> int:
        return len(self._waiting)

    def _expire(self, now: float) -> None:
        waiting = self._waiting
        while waiting:
            consent = next(iter(waiting.values()))
            if consent.deadline > now:
                break
            self.end(consent)

    def open(self, request: AuthorizeRequest, app: App, code: str, now: float) -> Consent | None:
        """Wait for the app's answer to `request` (its `id` set); None when the app has too many waiting."""
        self._expire(now)
        app_id = request.app_id
        if self._per_app.get(app_id, 0) >= self.max_per_app:
            return None
        if len(self._waiting) >= self.max_requests:
            self.end(next(iter(self._waiting.values())))
            self.forgotten += 1
        consent = Consent(request, app, code, now + WAIT_SECONDS)
        self._waiting[request.id] = consent
        self._per_app[app_id] = self._per_app.get(app_id, 0) + 1
        return consent

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
        left = self._per_app[request.app_id] - 1
        if left:
            self._per_app[request.app_id] = left
        else:
            del self._per_app[request.app_id]
        consent.waiter = None

    def answered(self, app: App, request_id: str, allow: bool, now: float) -> None:
        """The app `app` answered `consent`; an unknown id, another app's or a second answer is ignored."""
        consent = self.get(request_id, now)
        if consent is None or consent.app is not app or consent.allow is not None:
            return
        consent.allow = allow
        self.answers["allow" if allow else "deny"] += 1
        waiter = consent.waiter
        if waiter is not None:
            consent.waiter = None
            waiter(consent)
