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


def test_an_app_held_by_another_instance_refuses_to_be_asked_for_now():
    from clientmcp_fast.core.forwarding import RemoteApp

    app = RemoteApp(None, "todo-app", "instance-b", 1, 0, "subject")
    assert app.ask_consent("r1", "Claude", "https://claude.ai", "ABCD2345") == (
        "the app is connected to another instance: consent across instances is not built yet"
    )
