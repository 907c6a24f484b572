"""Requests waiting for consent (core/consent.py, docs/oauth.md): the code, the attempts, the bounds, the answers."""

from __future__ import annotations

import collections
import os
import re

import pytest

from clientmcp_fast.core.consent import (
    CODE_ALPHABET,
    CODE_LENGTH,
    ENDED,
    FORGOTTEN,
    MAX_ATTEMPTS,
    WAIT_SECONDS,
    WRONG,
    ConsentRequests,
    new_code,
    typed_code,
)
from clientmcp_fast.core.oauth import REQUEST_SECONDS

NOW = 1_700_000_000.0


class Request:
    """What ConsentRequests reads of an authorization request."""

    def __init__(self, request_id: str, app_id: str = "todo-app") -> None:
        self.id = request_id
        self.app_id = app_id


def test_a_code_is_8_unambiguous_symbols_each_equally_likely():
    assert len(CODE_ALPHABET) == 31 and not set("01ILO") & set(CODE_ALPHABET)
    assert re.fullmatch(f"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}", new_code(os.urandom))
    # Each byte below 248 (8 * 31) is one symbol, each symbol 8 of those bytes.
    symbols = [new_code(lambda n, byte=byte: bytes([byte] * n))[0] for byte in range(248)]
    assert collections.Counter(symbols) == dict.fromkeys(CODE_ALPHABET, 8)


def test_the_code_skips_the_bytes_that_would_favour_some_symbols():
    # 248 and above (256 - 256 % 31) would map to the first 8 symbols a second time.
    high = iter([bytes([255] * 16), bytes([0] * 16)])
    assert new_code(lambda n: next(high)) == "A" * 8


@pytest.mark.parametrize("typed", ["ABCD2345", "abcd2345", " abcd-2345 ", "AB CD 23 45"])
def test_a_code_is_taken_as_people_type_it(typed):
    assert typed_code(typed) == "ABCD2345"


def test_a_request_waits_until_answered_ended_or_its_10_minutes():
    assert WAIT_SECONDS == REQUEST_SECONDS
    app = object()
    requests = ConsentRequests()
    consent = requests.open(Request("r1"), app, "ABCD2345", NOW)
    assert requests.get("r1", NOW + WAIT_SECONDS - 1) is consent
    assert requests.get("r1", NOW + WAIT_SECONDS) is None and len(requests) == 0
    consent = requests.open(Request("r2"), app, "ABCD2345", NOW)
    requests.end(consent)
    requests.end(consent)  # twice is harmless
    assert requests.get("r2", NOW) is None


def test_five_wrong_codes_end_the_request_and_the_right_one_is_compared_as_typed():
    consent = ConsentRequests().open(Request("r1"), object(), "ABCD2345", NOW)
    assert consent.code_is("abcd-2345") and not consent.code_is("ABCD2346") and not consent.code_is("")
    assert [consent.wrong_code() for _ in range(MAX_ATTEMPTS)] == [WRONG] * (MAX_ATTEMPTS - 1) + [ENDED]


def test_only_the_asked_app_answers_once_and_a_waiting_form_hears_it():
    app, other = object(), object()
    requests = ConsentRequests()
    consent = requests.open(Request("r1"), app, "ABCD2345", NOW)
    heard = []
    consent.waiter = heard.append
    requests.answered(other, "r1", True, NOW)
    requests.answered(app, "unknown", True, NOW)
    assert consent.allow is None and heard == []
    requests.answered(app, "r1", True, NOW)
    requests.answered(app, "r1", False, NOW)
    assert consent.allow is True and heard == [consent] and consent.waiter is None
    assert requests.answers == {"allow": 1, "deny": 0}


def test_each_app_has_a_bounded_share_and_the_process_a_bound_oldest_first():
    requests = ConsentRequests(max_requests=5, max_per_app=3)
    app = object()
    opened = [requests.open(Request(f"a{n}", "app-a"), app, "ABCD2345", NOW) for n in range(3)]
    assert requests.open(Request("a3", "app-a"), app, "ABCD2345", NOW) is None  # app-a's share is full
    for n in range(3):
        assert requests.open(Request(f"b{n}", "app-b"), app, "ABCD2345", NOW + 1) is not None
    # The 6th request of the process forgot the oldest, app-a's first, which frees its share.
    assert requests.get("a0", NOW) is None and requests.forgotten == 1 and len(requests) == 5
    # app-a has 2 waiting now: a 3rd is taken, and the process forgets its oldest, app-a's second.
    assert requests.open(Request("a3", "app-a"), app, "ABCD2345", NOW + 2) is not None
    assert requests.get(opened[1].request.id, NOW + 2) is None and requests.forgotten == 2


def test_the_bounds_are_documented():
    from pathlib import Path

    from clientmcp_fast.core.consent import MAX_REQUESTS, MAX_REQUESTS_PER_APP

    limits = (Path(__file__).parents[2] / "docs" / "limits.md").read_text()
    assert f"{MAX_REQUESTS:,}" in limits and "consent" in limits
    assert f"{MAX_REQUESTS_PER_APP} per app" in limits
    # The row says the relayed requests share those bounds, and the bounds themselves.
    (row,) = [line for line in limits.splitlines() if line.startswith("| OAuth requests waiting for consent")]
    assert "relayed to an app of this instance for another instance's page" in row
    assert f"{MAX_REQUESTS:,} in the process and {MAX_REQUESTS_PER_APP} per app, both kinds together" in row
    assert f"{WAIT_SECONDS // 60} minutes" in row
    assert "test_relayed_and_local_requests_share_the_bounds" in row


def test_a_relayed_request_is_answered_once_by_the_asked_app_and_counted_here():
    """The app's instance of a page shown elsewhere (docs/scaling.md, Consent across instances)."""
    app, other = object(), object()
    requests = ConsentRequests()
    replies = []
    relayed = requests.relay("r1", "todo-app", app, lambda *reply: replies.append(reply), NOW)
    assert relayed is not None and len(requests) == 1
    assert requests.get("r1", NOW) is None  # no page of this process: its form is not taken here
    requests.answered(other, "r1", True, NOW)
    requests.answered(app, "unknown", True, NOW)
    assert replies == []
    requests.answered(app, "r1", False, NOW)
    requests.answered(app, "r1", True, NOW)
    assert replies == [(False, None)] and len(requests) == 0
    assert requests.answers == {"allow": 0, "deny": 1}


def test_a_relayed_request_waits_its_10_minutes_only():
    app = object()
    requests = ConsentRequests()
    replies = []
    requests.relay("r1", "todo-app", app, lambda *reply: replies.append(reply), NOW)
    requests.answered(app, "r1", True, NOW + WAIT_SECONDS)
    assert replies == [] and len(requests) == 0 and requests.answers == {"allow": 0, "deny": 0}


def test_relayed_and_local_requests_share_the_bounds():
    requests = ConsentRequests(max_requests=4, max_per_app=3)
    app = object()
    replies = []
    reply = replies.append
    assert requests.relay("a0", "app-a", app, lambda *r: reply(("a0", *r)), NOW) is not None
    assert requests.open(Request("a1", "app-a"), app, "ABCD2345", NOW + 1) is not None
    assert requests.relay("a2", "app-a", app, lambda *r: reply(("a2", *r)), NOW + 2) is not None
    # app-a's share is full, whichever kind the next is.
    assert requests.relay("a3", "app-a", app, lambda *r: reply(("a3", *r)), NOW + 3) is None
    assert requests.open(Request("a3", "app-a"), app, "ABCD2345", NOW + 3) is None
    assert requests.open(Request("b0", "app-b"), app, "ABCD2345", NOW + 3) is not None
    # The 5th of the process forgets the oldest, a relayed one, whose page's instance is told.
    assert requests.relay("b1", "app-b", app, lambda *r: reply(("b1", *r)), NOW + 4) is not None
    assert replies == [("a0", False, FORGOTTEN)] and requests.forgotten == 1 and len(requests) == 4
    # Then a local one, the oldest now.
    assert requests.relay("b2", "app-b", app, lambda *r: reply(("b2", *r)), NOW + 5) is not None
    assert requests.get("a1", NOW + 5) is None and requests.forgotten == 2
    assert replies == [("a0", False, FORGOTTEN)]


def test_a_relayed_id_already_waiting_is_not_taken_twice():
    app = object()
    requests = ConsentRequests()
    requests.open(Request("r1"), app, "ABCD2345", NOW)
    assert requests.relay("r1", "todo-app", app, lambda *reply: None, NOW) is None
    assert requests.relay("r2", "todo-app", app, lambda *reply: None, NOW) is not None
    assert requests.relay("r2", "todo-app", app, lambda *reply: None, NOW) is None
    assert len(requests) == 2


def test_an_answer_heard_from_the_apps_instance_reaches_the_waiting_form_once():
    requests = ConsentRequests()
    consent = requests.open(Request("r1"), object(), "ABCD2345", NOW)
    heard = []
    consent.waiter = heard.append
    requests.heard(consent, False, "it is not connected to this bridge")
    requests.heard(consent, True, None)  # only the first counts
    assert (consent.allow, consent.problem) == (False, "it is not connected to this bridge")
    assert heard == [consent] and requests.answers == {"allow": 0, "deny": 0}
    ended = requests.open(Request("r2"), object(), "ABCD2345", NOW)
    requests.end(ended)
    requests.heard(ended, True, None)  # ended already: nothing changes
    assert ended.allow is None
