"""Every cluster message signed by the instances, so that a client of the bus can neither forge nor replay one.

The NATS server is the cluster's only transport, and its credentials its first defence
(docs/scaling.md, Threat model). This is the second: a key derived from the token secret
every instance already holds (HKDF-SHA256, RFC 5869) signs each NATS message the cluster
sends, with keyed BLAKE2b-256 (RFC 7693: keyed, BLAKE2 is a MAC by itself, and the standard
library computes it in half the time of HMAC-SHA256) over the subject, a header and the
body. The header names the sender, a counter that grows by one with each message it sends,
and the time it was sent. A receiver
takes a message once and only while it is fresh:

- it must be signed (an older release's is not: `unsigned`), and its MAC must verify
  with one of the keys (every secret of CLIENTMCP_SECRETS is accepted, as for tokens; the
  signer is the signing secret's key), else it is `forged`;
- its time must be within FRESH_SECONDS of the receiver's clock, else it is `stale`;
- it must not be this instance's own (NATS does not echo them back), and its counter must
  not have been taken from that sender before: a window of the latest
  REPLAY_WINDOW counters per sender (RFC 4303 §3.4.3's anti-replay window), which admits
  messages that two subscriptions delivered out of order, else it is `replayed`.

A sender's window is kept while it might still be needed: a replayed message older than
FRESH_SECONDS is stale anyway, so a window unused for twice that is forgotten
(`forget_quiet`). Only a message whose MAC verified makes a window, so their number is the
number of real instances heard from lately.

Sans-I/O: the wall-clock time is an argument (`now`, seconds since the epoch); the NATS side
reads it. Nothing is encrypted: docs/scaling.md, Threat model, says why.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from hashlib import blake2b

# docs/scaling.md, Threat model: how far a message's time may be from the receiver's clock.
# Instances' clocks must agree within it (any NTP does); it also bounds how long a message
# may be held back and still be taken.
FRESH_SECONDS = 10.0
# How many of a sender's latest counters are remembered; a message further behind its
# newest is refused (messages of one sender reach a receiver in order on NATS, so only the
# hand-over between two subscriptions can put a few out of order).
REPLAY_WINDOW = 1024
_WINDOW_MASK = (1 << REPLAY_WINDOW) - 1

# A signed message starts with a byte MessagePack never uses, so that one of an older release
# (a bare MessagePack array, unsigned) is told apart from a forgery: `unsigned`, not `forged`.
MARK = 0xC1
VERSION = 1
MAC_BYTES = 32
_MAC_AT = 1
_HEADER_AT = _MAC_AT + MAC_BYTES
_HEAD = struct.Struct(">BQQB")  # version, counter, time in milliseconds, sender's length
MAX_SENDER_BYTES = 64
_BODY_AT = _HEADER_AT + _HEAD.size  # then the sender's name, then the body
_INFO = b"clientmcp cluster bus v1"
_SALT = b"clientmcp.bus"

# Why a message was refused: the `reason` label of clientmcp_cluster_messages_dropped_total.
UNSIGNED = "unsigned"
FORGED = "forged"
STALE = "stale"
REPLAYED = "replayed"
MALFORMED = "malformed"


class Refused(Exception):
    """A NATS message the cluster does not take; `reason` is one of UNSIGNED, FORGED, STALE, REPLAYED, MALFORMED."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def bus_key(secret: bytes) -> bytes:
    """The bus's MAC key for a token secret: HKDF-SHA256 (RFC 5869), so the secret never signs bus messages."""
    prk = hmac.new(_SALT, secret, hashlib.sha256).digest()  # Extract
    return hmac.new(prk, _INFO + b"\x01", hashlib.sha256).digest()  # Expand, one block: L = 32


class _Window:
    """One sender's anti-replay window: its newest counter and which of the ones before it were taken."""

    __slots__ = ("top", "bits", "heard")

    def __init__(self, counter: int, heard: float) -> None:
        self.top = counter
        self.bits = 1
        self.heard = heard

    def take(self, counter: int) -> bool:
        """Whether `counter` is new; it is remembered as taken."""
        top = self.top
        if counter > top:
            ahead = counter - top
            # A jump past the window leaves nothing of it: shifting by the jump itself would cost
            # time and memory in its size, which a signed header may set up to 2**64.
            self.bits = ((self.bits << ahead) | 1) & _WINDOW_MASK if ahead < REPLAY_WINDOW else 1
            self.top = counter
            return True
        behind = top - counter
        if behind >= REPLAY_WINDOW or self.bits >> behind & 1:
            return False
        self.bits |= 1 << behind
        return True


class BusAuth:
    """Signs what this instance sends and checks what it receives (one per instance)."""

    def __init__(self, secrets: tuple[bytes, ...], signing_secret: bytes, sender: str) -> None:
        keys = [signing_secret] + [secret for secret in secrets if secret != signing_secret]
        # Keyed once: each message copies a keyed state rather than hashing the key again.
        self._signer = blake2b(key=bus_key(signing_secret), digest_size=MAC_BYTES)
        self._verifiers = [blake2b(key=bus_key(secret), digest_size=MAC_BYTES) for secret in keys]
        self._counter = 0
        self._windows: dict[bytes, _Window] = {}
        self.sender = sender

    @property
    def sender(self) -> str:
        """This instance's ID, named in each header: at most MAX_SENDER_BYTES of ASCII."""
        return self._name.decode()

    @sender.setter
    def sender(self, name: str) -> None:
        self._name = name.encode()

    def seal(self, subject: str, body: bytes, now: float) -> tuple[bytes, bytes]:
        """The (head, body) to publish on `subject`: head is the mark, the MAC and the header; the body as it is."""
        self._counter += 1
        name = self._name
        header = _HEAD.pack(VERSION, self._counter, int(now * 1000), len(name)) + name
        mac = self._signer.copy()
        mac.update(subject.encode() + b"\n" + header)
        mac.update(body)
        return b"\xc1" + mac.digest() + header, body

    def open(self, subject: str, data: bytes, now: float) -> tuple[memoryview, float]:
        """The body of a NATS message and its age in seconds; Refused if it is not to be taken."""
        view = memoryview(data)
        if not view or view[0] != MARK:
            raise Refused(UNSIGNED)
        if len(view) < _BODY_AT:
            raise Refused(MALFORMED)
        version, counter, sent_ms, name_size = _HEAD.unpack_from(view, _HEADER_AT)
        body_at = _BODY_AT + name_size
        if version != VERSION or name_size == 0 or name_size > MAX_SENDER_BYTES or len(view) < body_at:
            raise Refused(MALFORMED)
        signed = subject.encode() + b"\n"
        signature = view[_MAC_AT:_HEADER_AT]
        for keyed in self._verifiers:
            mac = keyed.copy()
            mac.update(signed)
            mac.update(view[_HEADER_AT:])
            if hmac.compare_digest(mac.digest(), signature):
                break
        else:
            raise Refused(FORGED)
        age = now - sent_ms / 1000
        if not -FRESH_SECONDS <= age <= FRESH_SECONDS:
            raise Refused(STALE)
        sender = bytes(view[_BODY_AT:body_at])
        window = self._windows.get(sender)
        if window is not None:
            if not window.take(counter):
                raise Refused(REPLAYED)
            window.heard = now
        elif sender == self._name:
            raise Refused(REPLAYED)  # NATS never echoes an instance's own messages: someone sent it again
        else:
            self._windows[sender] = _Window(counter, now)
        return view[body_at:], age

    def forget_quiet(self, now: float) -> None:
        """Forget the windows of senders not heard from for 2 * FRESH_SECONDS: their old messages are stale by then."""
        quiet = [sender for sender, window in self._windows.items() if now - window.heard > 2 * FRESH_SECONDS]
        for sender in quiet:
            del self._windows[sender]
