"""Every cluster message signed and taken once while fresh (core/bus_auth.py; docs/scaling.md, Threat model)."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from clientmcp_fast.core.bus_auth import (
    FRESH_SECONDS,
    REPLAY_WINDOW,
    BusAuth,
    Refused,
    bus_key,
)

SECRET = b"a cluster secret of 32 bytes or more"
OLD_SECRET = b"the secret before the rotation, 32+ bytes"
NOW = 1_700_000_000.0


def hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869, written from its text."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return okm[:length]


def test_the_mac_is_keyed_blake2b_of_subject_header_and_body():
    """RFC 7693's keyed mode with the bus key: checked by computing it here from the parts."""
    a = BusAuth((SECRET,), SECRET, "a1")
    data = sealed(a, "clientmcp.i.b1", b"\x91\x01")
    mac, rest = data[1:33], data[33:]
    assert data[0] == 0xC1
    assert mac == hashlib.blake2b(b"clientmcp.i.b1\n" + rest, key=bus_key(SECRET), digest_size=32).digest()


def test_the_key_is_hkdf_sha256_of_the_secret():
    # RFC 5869, A.1: the reference above is right.
    okm = hkdf(bytes(range(13)), b"\x0b" * 22, bytes(range(0xF0, 0xFA)), 42)
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )
    assert bus_key(SECRET) == hkdf(b"clientmcp.bus", SECRET, b"clientmcp cluster bus v1", 32)
    assert bus_key(SECRET) != bus_key(OLD_SECRET) and bus_key(SECRET) != SECRET


def sealed(
    sender: BusAuth, subject: str = "clientmcp.beat", body: bytes = b"\x91\x01", now: float = NOW
) -> bytes:
    head, body = sender.seal(subject, body, now)
    return head + body


def reason(receiver: BusAuth, data: bytes, subject: str = "clientmcp.beat", now: float = NOW) -> str:
    with pytest.raises(Refused) as refused:
        receiver.open(subject, data, now)
    return refused.value.reason


def test_a_signed_message_opens_to_its_body_sender_and_age():
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    body, age = b.open("clientmcp.beat", sealed(a), NOW + 0.25)
    assert bytes(body) == b"\x91\x01" and age == pytest.approx(0.25)
    assert bytes(sealed(a))[1 + 32 + 18 :].startswith(b"a1\x91\x01")  # the sender named in the header


def test_anything_changed_is_forged():
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    data = sealed(a)
    for index in range(1, len(data)):
        changed = bytearray(data)
        changed[index] ^= 0x01
        assert reason(b, bytes(changed)) in ("forged", "malformed"), index
    assert reason(b, data, subject="clientmcp.i.b1") == "forged"  # moved to another subject
    assert reason(b, data + b"\x00") == "forged"
    outsider = BusAuth(
        (b"another secret of 32 bytes or more!",), b"another secret of 32 bytes or more!", "a1"
    )
    assert reason(b, sealed(outsider)) == "forged"


def test_unsigned_and_malformed_are_told_apart():
    b = BusAuth((SECRET,), SECRET, "b1")
    assert reason(b, b"\x91\x93\x06\xa2a1\x01") == "unsigned"  # a previous release's MessagePack
    assert reason(b, b"") == "unsigned"
    assert reason(b, b"\xc1" + b"\x00" * 10) == "malformed"
    head = sealed(BusAuth((SECRET,), SECRET, "a1"))
    assert reason(b, head[:52]) == "malformed"  # cut inside the sender's name


def test_every_secret_of_a_rotation_verifies_and_the_signer_signs():
    rotating = BusAuth((SECRET, OLD_SECRET), SECRET, "new1")
    old = BusAuth((OLD_SECRET,), OLD_SECRET, "old1")
    assert bytes(rotating.open("s", sealed(old, "s"), NOW)[0]) == b"\x91\x01"
    assert reason(old, sealed(rotating, "s"), "s") == "forged"  # the old one has not the new secret yet


@pytest.mark.parametrize("skew", [FRESH_SECONDS + 0.01, -FRESH_SECONDS - 0.01, 3600.0])
def test_a_message_out_of_its_time_is_stale(skew):
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    assert reason(b, sealed(a), now=NOW + skew) == "stale"
    b.open("clientmcp.beat", sealed(a), NOW + FRESH_SECONDS - 0.01)


def test_a_message_is_taken_once():
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    data = sealed(a)
    b.open("clientmcp.beat", data, NOW)
    assert reason(b, data) == "replayed"
    later = sealed(a)
    b.open("clientmcp.beat", later, NOW)
    assert reason(b, data) == reason(b, later) == "replayed"


def test_messages_out_of_order_within_the_window_are_taken_once_and_older_ones_refused():
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    messages = [sealed(a) for _ in range(REPLAY_WINDOW + 2)]
    b.open("clientmcp.beat", messages[1], NOW)
    b.open("clientmcp.beat", messages[0], NOW)  # overtaken by the next: taken
    assert reason(b, messages[0]) == "replayed"
    b.open("clientmcp.beat", messages[-1], NOW)  # REPLAY_WINDOW + 1 ahead
    assert reason(b, messages[0]) == "replayed"
    assert reason(b, messages[1]) == "replayed"  # out of the window: refused, taken or not
    b.open("clientmcp.beat", messages[2], NOW)  # the oldest still in the window, never taken
    assert reason(b, messages[2]) == "replayed"


@pytest.mark.parametrize("jump", [REPLAY_WINDOW, 2**40, 2**64 - 3])
def test_a_counter_far_ahead_is_taken_at_once_and_leaves_the_window_behind(jump):
    """A signed header may name any counter up to 2**64 - 1: a jump costs what a step does."""
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    first = sealed(a)
    b.open("clientmcp.beat", first, NOW)
    a._counter += jump
    ahead = sealed(a)
    started = time.perf_counter()
    b.open("clientmcp.beat", ahead, NOW)
    assert time.perf_counter() - started < 0.05
    assert b._windows[b"a1"].bits < 1 << REPLAY_WINDOW
    assert reason(b, ahead) == reason(b, first) == "replayed"


def test_a_quiet_sender_is_forgotten_only_once_its_messages_are_stale():
    a, b = BusAuth((SECRET,), SECRET, "a1"), BusAuth((SECRET,), SECRET, "b1")
    data = sealed(a)
    b.open("clientmcp.beat", data, NOW)
    b.forget_quiet(NOW + 2 * FRESH_SECONDS)
    assert reason(b, data, now=NOW + 2 * FRESH_SECONDS) in ("replayed", "stale")
    b.forget_quiet(NOW + 2 * FRESH_SECONDS + 0.01)
    assert not b._windows
    assert reason(b, data, now=NOW + 2 * FRESH_SECONDS + 0.01) == "stale"


def test_an_instance_s_own_message_sent_back_to_it_is_a_replay():
    """NATS does not echo an instance's messages: one that comes back was published again by someone."""
    a = BusAuth((SECRET,), SECRET, "a1")
    assert reason(a, sealed(a)) == "replayed"
