"""The cluster's bus messages: one typed layout per kind, read and checked by msgspec in one call.

What the instances of a cluster say to each other (docs/scaling.md, Design) travels as
MessagePack: a NATS message's payload is an array of messages, and each message an array
whose first element is its kind, then its fields in a fixed order. Each kind is a
`msgspec.Struct` with `array_like=True` and `tag=` its kind, so `encode` writes exactly that
array and `decode_batch` reads it back into the Struct. Every field's type carries the bounds
of docs/scaling.md, Bounds (`Integer`, `Text`, `InstanceName`, `Outcome`), so a message that
decodes is one whose every field the directory may act on; a bad one is dropped alone.

Upgrades (docs/scaling.md, Upgrades): instances of one WIRE_VERSION share a cluster whatever
their releases, so within a wire version the layouts only grow at the end:

- A field is added as the last of its Struct with a default that keeps the older behaviour,
  say `priority: Integer = 0`. An older release skips it (msgspec ignores the elements after
  those an array-like Struct declares); a message from an older release lacks it and is read
  with the default. Every field after one with a default needs a default too.
- A kind is added as a new Struct with a new tag, in `Message`: an older release ignores a
  kind it does not know (`decode_batch` neither returns nor counts it), so what it does must
  not need an answer from an older instance.
- Anything else (a field removed, moved, retyped or read differently, a bound narrowed)
  raises WIRE_VERSION. `Beat` and `Sync` keep their first fields in every version, so that
  instances of two versions recognise each other.

Version 2's first release had no field with a default; since then `State` has gained
`consent` (read as None from that release) and the kinds PROGRESS, AUTHORIZE and CONSENT
were added. A message shorter than its first release's layout is malformed.
tests/core/test_wire.py reads version 2's messages as its first release wrote them.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec
from msgspec import Meta

from clientmcp_fast.core.outcomes import Outcome

# docs/scaling.md, Upgrades: raised by a change of the messages that an older release cannot
# read (a field removed, moved or meaning something else), never by a field added at the end.
# Version 2 signs every message (core/bus_auth.py) and never hears version 1, which did not.
WIRE_VERSION = 2

# The kinds: each message's first element, the tag of its Struct.
STATE = 1
GONE = 2
APP = 3
RESULT = 4
ERROR = 5
BEAT = 6
SYNC = 7
CANCEL = 8
PROGRESS = 9
AUTHORIZE = 10
CONSENT = 11

# docs/scaling.md, Bounds: every integer on the bus is in [0, MAX_INTEGER], so that adding one
# to an epoch never leaves MessagePack's range; every string but an app's instructions is at
# most MAX_STRING characters; an instance's ID is a short name of its own, as it becomes part
# of a subject.
MAX_INTEGER = 1 << 62
MAX_STRING = 1024
INSTANCE_NAME = re.compile(r"[0-9A-Za-z_-]{1,64}")

Integer = Annotated[int, Meta(ge=0, le=MAX_INTEGER)]
Text = Annotated[str, Meta(max_length=MAX_STRING)]
# Its characters are checked by `_FromInstance`: msgspec's `Meta(pattern=...)` looks up the
# pattern's `search` by name and calls it for each string, slower than the rest of reading a
# forwarded call together.
InstanceName = Annotated[str, Meta(min_length=1, max_length=64)]
# How a call ended, an Outcome (core/outcomes.py): one no release has is malformed.
OutcomeNumber = Annotated[int, Meta(ge=0, lt=len(Outcome))]


class _FromInstance(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A message with an `instance` field naming the instance that sent it, checked when it is read or made.

    The field is declared by each kind, in its place: a field declared here would come first.
    """

    def __post_init__(self) -> None:
        name = self.instance  # type: ignore[attr-defined]
        # ASCII letters and digits are all that `isalnum` accepts of ASCII: an instance ID of
        # `secrets.token_hex` passes without the regex.
        if not (name.isascii() and name.isalnum()) and INSTANCE_NAME.fullmatch(name) is None:
            raise ValueError("the sending instance's ID is not 1-64 letters, digits, `_` or `-`")


class State(_FromInstance, tag=STATE):
    """A connection to `instance` holds `client_id`, with its tools (None before it registered)."""

    client_id: Text
    epoch: Integer
    instance: InstanceName
    tools: bytes | None  # the tools array's JSON
    instructions: str | None  # bounded by the register's validation on its instance, not here
    seq: Integer  # the sender's sequence (docs/scaling.md, Ordering)
    # Added in version 2 after its first release (docs/scaling.md, Consent across instances):
    # whether the app registered `consent: true`, so that another instance's consent page refuses
    # at once an app that cannot be asked. None: the sender is of the first release, which
    # takes no AUTHORIZE, so its apps cannot be asked from another instance.
    consent: bool | None = None


class Gone(_FromInstance, tag=GONE):
    """The connection of `epoch` to `instance` no longer holds `client_id`."""

    client_id: Text
    epoch: Integer
    instance: InstanceName
    seq: Integer


class ToApp(_FromInstance, tag=APP):
    """A `call` or `cancel` the bridge of `instance` wrote for an app held by the receiver."""

    instance: InstanceName  # the agent's
    client_id: Text
    epoch: Integer  # of the connection the agent's instance meant
    message: bytes  # the frame's JSON, as the bridge wrote it
    timeout_ms: Integer  # the agent's instance's call timeout
    # The sequence of the latest SYNC the sender applied from the receiver (docs/scaling.md,
    # Calls that never run late).
    floor: Integer


class Result(msgspec.Struct, array_like=True, tag=RESULT, frozen=True, gc=False):
    """An app's result of the call `call_id` that the receiver forwarded."""

    client_id: Text
    call_id: Text
    result: bytes  # the result's JSON
    has_result_type: bool


class Error(msgspec.Struct, array_like=True, tag=ERROR, frozen=True, gc=False):
    """The call `call_id` that the receiver forwarded ended without a result: its tool error and outcome."""

    client_id: Text
    call_id: Text
    text: Text
    outcome: OutcomeNumber


class Beat(_FromInstance, tag=BEAT):
    """A heartbeat (docs/scaling.md, Failure detection); every wire version keeps this layout."""

    instance: InstanceName
    wire_version: Integer


class Sync(_FromInstance, tag=SYNC):
    """Forget what `instance` said before `seq`: the states after it are what it holds; `answer` asks for ours.

    Every wire version keeps its first three fields (docs/scaling.md, Upgrades).
    """

    instance: InstanceName
    seq: Integer
    wire_version: Integer
    answer: bool


class Cancel(_FromInstance, tag=CANCEL):
    """A legacy notifications/cancelled that named no call of `client_id`'s app made on `instance`."""

    client_id: Text
    request_id: bytes  # the JSON-RPC ID's JSON
    session: bytes | None
    instance: InstanceName


class Progress(msgspec.Struct, array_like=True, tag=PROGRESS, frozen=True, gc=False):
    """The app's report on the call `call_id` the receiver forwarded (docs/scaling.md, Progress and trace context).

    Added in version 2 after its first release: an older release ignores the kind, and its
    agents get no progress for calls forwarded to apps elsewhere, as before.
    """

    client_id: Text
    call_id: Text
    progress: float
    total: float | None
    message: Text | None


class Authorize(_FromInstance, tag=AUTHORIZE):
    """The consent page of `instance` asks the receiver's app of `client_id` and `epoch`: send it `authorize`.

    docs/scaling.md, Consent across instances. Sent only to an instance whose STATE said
    `consent: true`, so never to a release that would ignore it.
    """

    client_id: Text
    epoch: Integer  # of the connection the page's instance meant
    instance: InstanceName  # the page's: where the answer goes
    request_id: Text  # the `authorize` message's id
    client_name: Text | None  # the client's registered name, if it gave one
    client_uri: Text  # its redirect URI's origin
    code: Text  # the code the person types into the page


class Consent(_FromInstance, tag=CONSENT):
    """The app of `client_id` and `epoch` on `instance` answered the AUTHORIZE `request_id`, or cannot be asked.

    `problem` is None for the app's own answer `allow`; else it says why the app was not asked
    (as a page says it for an app of its own instance), and `allow` is false.
    """

    client_id: Text
    epoch: Integer
    instance: InstanceName  # the app's
    request_id: Text
    allow: bool
    problem: Text | None


Message = State | Gone | ToApp | Result | Error | Beat | Sync | Cancel | Progress | Authorize | Consent
KINDS: dict[int, type] = {
    kind.__struct_config__.tag: kind
    for kind in (State, Gone, ToApp, Result, Error, Beat, Sync, Cancel, Progress, Authorize, Consent)
}


class _Head(msgspec.Struct, array_like=True, gc=False):
    """A message's kind alone, to tell a later release's kind from a malformed message."""

    kind: int


# A message or a list of them as MessagePack; a NATS payload is a list.
encode = msgspec.msgpack.Encoder().encode
_decode_batch = msgspec.msgpack.Decoder(list[Message]).decode
_decode_raws = msgspec.msgpack.Decoder(list[msgspec.Raw]).decode
_decode_one = msgspec.msgpack.Decoder(Message).decode
_decode_head = msgspec.msgpack.Decoder(_Head).decode
_ERRORS = (msgspec.DecodeError, RecursionError, MemoryError)  # MessagePack nested past msgspec's depth, say


def decode_batch(payload: bytes | memoryview) -> tuple[list[Message], list[str]]:
    """A NATS payload's messages, and why each malformed one was dropped; a later release's kinds are left out.

    Never raises. A message is kept only if every field this release reads has its type and
    bounds; the fields after them (a later release's) are skipped. A payload that is not an
    array of MessagePack values is one malformed message, whatever it held. Nothing returned
    refers to `payload` (core/bus_auth.py opens it as a view of the NATS message).
    """
    try:
        return _decode_batch(payload), []
    except _ERRORS:
        pass  # one bad message among good ones, say: each is read alone
    try:
        raws = _decode_raws(payload)
    except _ERRORS as error:
        return [], [f"not MessagePack messages: {error}"]
    messages: list[Message] = []
    dropped: list[str] = []
    for raw in raws:
        try:
            messages.append(_decode_one(raw))
        except _ERRORS as error:
            detail = _malformed(raw, error)
            if detail is not None:
                dropped.append(detail)
    return messages, dropped


def _malformed(raw: msgspec.Raw, error: Exception) -> str | None:
    """Why a message that did not decode is dropped; None for a kind of a later release, ignored."""
    try:
        kind = _decode_head(raw).kind
    except _ERRORS:
        return f"no kind: {error}"
    if kind not in KINDS:
        return None  # docs/scaling.md, Upgrades
    return f"a message of kind {kind}: {error}"
