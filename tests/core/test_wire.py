"""The cluster's bus messages (core/wire.py): bytes in, typed messages out.

docs/scaling.md, Bounds; docs/scaling.md, Upgrades.

`WIRE_2_BYTES` is what the first release of wire version 2 sent, byte for byte: its
messages were tuples, encoded as MessagePack arrays. Every later release of version 2 must
read them as they are, and write the same bytes for the same message, followed by the fields
added since (`ADDED_FIELDS`, read with their defaults from that release). `LATER_BYTES` is
what was added to version 2 since, byte for byte as this release writes it: `State`'s
`consent`, and the kinds AUTHORIZE and CONSENT (docs/scaling.md, Consent across instances).
"""

from __future__ import annotations

from typing import Any

import hypothesis
import msgspec
import pytest
from fakes import NOW, connect, make_bridge, register, tool
from hypothesis import strategies as st

from clientmcp_fast.core import wire
from clientmcp_fast.core.directory import Directory
from clientmcp_fast.core.forwarding import ForwardedCall, RemoteApp
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.wire import (
    APP,
    AUTHORIZE,
    BEAT,
    CANCEL,
    CONSENT,
    ERROR,
    GONE,
    MAX_INTEGER,
    MAX_STRING,
    PROGRESS,
    RESULT,
    STATE,
    SYNC,
    WIRE_VERSION,
    Authorize,
    Beat,
    Cancel,
    Consent,
    Error,
    Gone,
    Progress,
    Result,
    State,
    Sync,
    ToApp,
    decode_batch,
    encode,
)

EPOCH = 1765000000000 << 20 | 3  # core/directory.py's epoch_floor of a start in 2025, plus three connections
TOOLS = b'[{"name":"echo","inputSchema":{"type":"object"}}]'
CALL = b'{"type":"call","id":"0a1b2c3d4e5f-1","name":"echo","arguments":{"a":1}}'

# One NATS payload per message, as the first release of wire version 2 wrote it: the tuple it
# sent, the bytes on the bus, and what they read as now.
WIRE_2_BYTES = {
    "state": (
        (STATE, "app-1", EPOCH, "b1c2d3e4f5a6", TOOLS, "Say hello.", 12),
        b'\x91\x97\x01\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xc41[{"name":"echo",'
        b'"inputSchema":{"type":"object"}}]\xaaSay hello.\x0c',
        State(
            client_id="app-1",
            epoch=EPOCH,
            instance="b1c2d3e4f5a6",
            tools=TOOLS,
            instructions="Say hello.",
            seq=12,
        ),
    ),
    "state before register": (
        (STATE, "app-1", EPOCH, "b1c2d3e4f5a6", None, None, 11),
        b"\x91\x97\x01\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xc0\xc0\x0b",
        State(client_id="app-1", epoch=EPOCH, instance="b1c2d3e4f5a6", tools=None, instructions=None, seq=11),
    ),
    "gone": (
        (GONE, "app-1", EPOCH, "b1c2d3e4f5a6", 13),
        b"\x91\x95\x02\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\r",
        Gone(client_id="app-1", epoch=EPOCH, instance="b1c2d3e4f5a6", seq=13),
    ),
    "call": (
        (APP, "0a1b2c3d4e5f", "app-1", EPOCH, CALL, 30000, 4),
        b'\x91\x97\x03\xac0a1b2c3d4e5f\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xc4G{"type":"call",'
        b'"id":"0a1b2c3d4e5f-1","name":"echo","arguments":{"a":1}}\xcdu0\x04',
        ToApp(
            instance="0a1b2c3d4e5f", client_id="app-1", epoch=EPOCH, message=CALL, timeout_ms=30000, floor=4
        ),
    ),
    "result": (
        (RESULT, "app-1", "0a1b2c3d4e5f-1", b'{"content":[]}', False),
        b'\x91\x95\x04\xa5app-1\xae0a1b2c3d4e5f-1\xc4\x0e{"content":[]}\xc2',
        Result(client_id="app-1", call_id="0a1b2c3d4e5f-1", result=b'{"content":[]}', has_result_type=False),
    ),
    "error": (
        (ERROR, "app-1", "0a1b2c3d4e5f-1", "The application disconnected before answering.", 6),
        b"\x91\x95\x05\xa5app-1\xae0a1b2c3d4e5f-1\xd9.The application disconnected before answering.\x06",
        Error(
            client_id="app-1",
            call_id="0a1b2c3d4e5f-1",
            text="The application disconnected before answering.",
            outcome=6,
        ),
    ),
    "beat": (
        (BEAT, "b1c2d3e4f5a6", 2),
        b"\x91\x93\x06\xacb1c2d3e4f5a6\x02",
        Beat(instance="b1c2d3e4f5a6", wire_version=2),
    ),
    "sync": (
        (SYNC, "b1c2d3e4f5a6", 14, 2, True),
        b"\x91\x95\x07\xacb1c2d3e4f5a6\x0e\x02\xc3",
        Sync(instance="b1c2d3e4f5a6", seq=14, wire_version=2, answer=True),
    ),
    "cancel": (
        (CANCEL, "app-1", b'"req-9"', b"6b3c9e", "0a1b2c3d4e5f"),
        b'\x91\x95\x08\xa5app-1\xc4\x07"req-9"\xc4\x066b3c9e\xac0a1b2c3d4e5f',
        Cancel(client_id="app-1", request_id=b'"req-9"', session=b"6b3c9e", instance="0a1b2c3d4e5f"),
    ),
    "cancel without a session": (
        (CANCEL, "app-1", b"9", None, "0a1b2c3d4e5f"),
        b"\x91\x95\x08\xa5app-1\xc4\x019\xc0\xac0a1b2c3d4e5f",
        Cancel(client_id="app-1", request_id=b"9", session=None, instance="0a1b2c3d4e5f"),
    ),
    "progress": (
        (PROGRESS, "app-1", "0a1b2c3d4e5f-1", 3.0, 10.0, "Copying files"),
        b"\x91\x96\t\xa5app-1\xae0a1b2c3d4e5f-1\xcb@\x08\x00\x00\x00\x00\x00\x00"
        b"\xcb@$\x00\x00\x00\x00\x00\x00\xadCopying files",
        Progress(
            client_id="app-1", call_id="0a1b2c3d4e5f-1", progress=3.0, total=10.0, message="Copying files"
        ),
    ),
    "progress with no total or message": (
        (PROGRESS, "app-1", "0a1b2c3d4e5f-1", 0.5, None, None),
        b"\x91\x96\t\xa5app-1\xae0a1b2c3d4e5f-1\xcb?\xe0\x00\x00\x00\x00\x00\x00\xc0\xc0",
        Progress(client_id="app-1", call_id="0a1b2c3d4e5f-1", progress=0.5, total=None, message=None),
    ),
}
SENT = {name: sent for name, (sent, _, _) in WIRE_2_BYTES.items()}

# Fields added to a kind since the first release of version 2, as a message of that release
# reads with them: their defaults.
ADDED_FIELDS: dict[int, tuple] = {STATE: (None,)}

REQUEST_ID = "q8Zr0Vh1sN3oPq2Lm4Xw7A"
# What was added to version 2 since its first release, one NATS payload per message: the tuple,
# the bytes this release writes for it, and what they read as.
LATER_BYTES = {
    "state of an app that asks for consent": (
        (STATE, "app-1", EPOCH, "b1c2d3e4f5a6", TOOLS, "Say hello.", 12, True),
        b'\x91\x98\x01\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xc41[{"name":"echo",'
        b'"inputSchema":{"type":"object"}}]\xaaSay hello.\x0c\xc3',
        State(
            client_id="app-1",
            epoch=EPOCH,
            instance="b1c2d3e4f5a6",
            tools=TOOLS,
            instructions="Say hello.",
            seq=12,
            consent=True,
        ),
    ),
    "state before register, by this release": (
        (STATE, "app-1", EPOCH, "b1c2d3e4f5a6", None, None, 11, False),
        b"\x91\x98\x01\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xc0\xc0\x0b\xc2",
        State(
            client_id="app-1",
            epoch=EPOCH,
            instance="b1c2d3e4f5a6",
            tools=None,
            instructions=None,
            seq=11,
            consent=False,
        ),
    ),
    "authorize": (
        (AUTHORIZE, "app-1", EPOCH, "0a1b2c3d4e5f", REQUEST_ID, "Claude", "https://claude.ai", "HJK2M3NP"),
        b"\x91\x98\n\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xac0a1b2c3d4e5f\xb6q8Zr0Vh1sN3oPq2Lm4Xw7A"
        b"\xa6Claude\xb1https://claude.ai\xa8HJK2M3NP",
        Authorize(
            client_id="app-1",
            epoch=EPOCH,
            instance="0a1b2c3d4e5f",
            request_id=REQUEST_ID,
            client_name="Claude",
            client_uri="https://claude.ai",
            code="HJK2M3NP",
        ),
    ),
    "authorize for a client without a name": (
        (AUTHORIZE, "app-1", EPOCH, "0a1b2c3d4e5f", REQUEST_ID, None, "http://127.0.0.1:33418", "HJK2M3NP"),
        b"\x91\x98\n\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xac0a1b2c3d4e5f\xb6q8Zr0Vh1sN3oPq2Lm4Xw7A"
        b"\xc0\xb6http://127.0.0.1:33418\xa8HJK2M3NP",
        Authorize(
            client_id="app-1",
            epoch=EPOCH,
            instance="0a1b2c3d4e5f",
            request_id=REQUEST_ID,
            client_name=None,
            client_uri="http://127.0.0.1:33418",
            code="HJK2M3NP",
        ),
    ),
    "consent": (
        (CONSENT, "app-1", EPOCH, "b1c2d3e4f5a6", REQUEST_ID, True, None),
        b"\x91\x97\x0b\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xb6q8Zr0Vh1sN3oPq2Lm4Xw7A\xc3\xc0",
        Consent(
            client_id="app-1",
            epoch=EPOCH,
            instance="b1c2d3e4f5a6",
            request_id=REQUEST_ID,
            allow=True,
            problem=None,
        ),
    ),
    "consent: the app cannot be asked": (
        (CONSENT, "app-1", EPOCH, "b1c2d3e4f5a6", REQUEST_ID, False, "it is not connected to this bridge"),
        b"\x91\x97\x0b\xa5app-1\xcf\x19\xaf#+ \x00\x00\x03\xacb1c2d3e4f5a6\xb6q8Zr0Vh1sN3oPq2Lm4Xw7A"
        b'\xc2\xd9"it is not connected to this bridge',
        Consent(
            client_id="app-1",
            epoch=EPOCH,
            instance="b1c2d3e4f5a6",
            request_id=REQUEST_ID,
            allow=False,
            problem="it is not connected to this bridge",
        ),
    ),
}
LATER_SENT = {name: sent for name, (sent, _, _) in LATER_BYTES.items()}


def payload(*messages: Any) -> bytes:
    """One NATS payload holding `messages`, tuples or lists as the first release of version 2 wrote them."""
    return msgspec.msgpack.encode(list(messages))


def verdict(message: Any) -> tuple[str, Any]:
    """What `decode_batch` makes of a payload holding `message` alone: taken, ignored or malformed."""
    messages, dropped = decode_batch(payload(message))
    if messages:
        assert len(messages) == 1 and not dropped
        return "taken", messages[0]
    if dropped:
        assert len(dropped) == 1
        return "malformed", dropped[0]
    return "ignored", None


# -- the bytes of the first release of wire version 2 ----------------------------------------------


def as_written(sent: tuple) -> tuple:
    """A first release's message as this release writes it: the same fields, then the defaults of those added."""
    return (*sent, *ADDED_FIELDS.get(sent[0], ()))


@pytest.mark.parametrize("name", WIRE_2_BYTES)
def test_the_first_release_bytes_read_as_the_message_it_sent(name):
    sent, on_the_bus, expected = WIRE_2_BYTES[name]
    assert payload(sent) == on_the_bus  # the fixture is what its tuples were encoded as
    assert decode_batch(on_the_bus) == ([expected], [])
    assert type(expected).__struct_config__.tag == sent[0]
    assert msgspec.structs.astuple(expected) == as_written(sent)[1:]


@pytest.mark.parametrize("name", WIRE_2_BYTES)
def test_a_message_is_written_as_the_first_release_wrote_it(name):
    sent, on_the_bus, message = WIRE_2_BYTES[name]
    assert encode([message]) == payload(as_written(sent))
    if sent[0] not in ADDED_FIELDS:
        assert encode([message]) == on_the_bus
    else:
        # The first release's bytes of each field (after the array's head, one byte longer),
        # then the added fields, which a first release skips as fields of a later one.
        assert encode([message])[2:].startswith(on_the_bus[2:])


def test_a_payload_of_every_kind_reads_in_order_in_one_call():
    expected = [message for _, _, message in (*WIRE_2_BYTES.values(), *LATER_BYTES.values())]
    first = payload(*SENT.values(), *LATER_SENT.values())
    assert decode_batch(first) == (expected, [])
    assert encode(expected) == payload(*map(as_written, SENT.values()), *LATER_SENT.values())


# -- what was added to version 2 since its first release ----------------------------------------------


@pytest.mark.parametrize("name", LATER_BYTES)
def test_what_was_added_since_reads_and_is_written_byte_for_byte(name):
    sent, on_the_bus, message = LATER_BYTES[name]
    assert payload(sent) == on_the_bus
    assert decode_batch(on_the_bus) == ([message], [])
    assert encode([message]) == on_the_bus
    assert type(message).__struct_config__.tag == sent[0]
    assert msgspec.structs.astuple(message) == sent[1:]


@pytest.mark.parametrize("name", LATER_BYTES)
def test_fields_a_later_release_adds_after_those_added_since_are_skipped(name):
    sent, _, expected = LATER_BYTES[name]
    for extra in (["later"], [1, None, {"later": [b"x", 2.5]}], [[[[["deep"]]]]]):
        assert decode_batch(payload((*sent, *extra))) == ([expected], [])


@pytest.mark.parametrize("name", ["authorize", "consent"])
def test_a_new_kind_shorter_than_its_layout_is_malformed(name):
    sent, _, _ = LATER_BYTES[name]
    for size in range(1, len(sent)):
        outcome, detail = verdict(sent[:size])
        assert outcome == "malformed", sent[:size]
        expected = f"a message of kind {sent[0]}: Expected `array` of at least length {len(sent)}"
        assert detail.startswith(expected), detail


# -- docs/scaling.md, Upgrades: what a later release may add ----------------------------------------


@pytest.mark.parametrize("name", WIRE_2_BYTES)
def test_fields_a_later_release_adds_at_the_end_are_skipped(name):
    sent, _, expected = WIRE_2_BYTES[name]
    for extra in (["later"], [1, None, {"later": [b"x", 2.5]}], [[[[["deep"]]]]]):
        assert decode_batch(payload((*as_written(sent), *extra))) == ([expected], [])


# CONSENT + 1: the first kind no release has yet.
@pytest.mark.parametrize("kind", [0, CONSENT + 1, 99, 255, 2**16, MAX_INTEGER + 1, 2**64 - 1, -1, -(2**63)])
def test_a_kind_of_a_later_release_is_ignored_and_not_counted(kind):
    assert verdict([kind, "a kind of a later release", {"with": "anything"}]) == ("ignored", None)
    assert verdict([kind]) == ("ignored", None)


@pytest.mark.parametrize("name", WIRE_2_BYTES)
def test_a_message_shorter_than_its_layout_is_malformed(name):
    sent, _, _ = WIRE_2_BYTES[name]
    for size in range(1, len(sent)):
        outcome, detail = verdict(sent[:size])
        assert outcome == "malformed", sent[:size]
        assert detail.startswith(
            f"a message of kind {sent[0]}: Expected `array` of at least length {len(sent)}"
        )


# -- docs/scaling.md, Bounds: every rule, field by field ----------------------------------------------

# What each field of each kind must be: the rules the first release of wire version 2 checked by
# hand, field by field (core/directory.py's `_FIELDS` and `_checked`), before core/wire.py.
RULES = {
    STATE: ("text", "integer", "name", "bytes or nil", "string or nil", "integer"),
    GONE: ("text", "integer", "name", "integer"),
    APP: ("name", "text", "integer", "bytes", "integer", "integer"),
    RESULT: ("text", "text", "bytes", "boolean"),
    ERROR: ("text", "text", "text", "outcome"),
    BEAT: ("name", "integer"),
    SYNC: ("name", "integer", "integer", "boolean"),
    CANCEL: ("text", "bytes", "bytes or nil", "name"),
}
# docs/scaling.md, Bounds: the fields and kinds added since, each field's rule.
ADDED_RULES = {STATE: ("boolean or nil",)}
NEW_KINDS = {
    AUTHORIZE: ("text", "integer", "name", "text", "text or nil", "text", "text"),
    CONSENT: ("text", "integer", "name", "text", "boolean", "text or nil"),
}
# Every field this release reads, kind by kind.
LAYOUTS = {kind: rules + ADDED_RULES.get(kind, ()) for kind, rules in RULES.items()} | NEW_KINDS
LAST_OUTCOME = len(Outcome) - 1
# Per rule, values taken and values dropped as malformed.
TAKEN = {
    "integer": [0, 1, 2**32, MAX_INTEGER],
    "text": ["", "x", "x" * MAX_STRING, "é" * MAX_STRING, "😀" * MAX_STRING, "a.b\n\x00"],
    "name": ["a", "Z", "0", "_", "-", "A-z_09", "x" * 64, "b1c2d3e4f5a6"],
    "bytes": [b"", b"\x00\xff", b"x" * 5000],
    "bytes or nil": [None, b"", b"x" * 5000],
    "string or nil": [None, "", "x" * (MAX_STRING + 1), "é" * 5000],  # instructions: not bounded here
    "boolean": [True, False],
    "boolean or nil": [True, False, None],
    "text or nil": [None, "", "x" * MAX_STRING, "😀" * MAX_STRING],
    "outcome": [0, LAST_OUTCOME],
}
NOT_INTEGERS = [True, False, 1.0, "1", b"1", None, [1], {"a": 1}]
NOT_TEXT = [b"x", 1, True, None, ["x"], {"x": 1}]
DROPPED = {
    "integer": [-1, -(2**63), MAX_INTEGER + 1, 2**64 - 1, *NOT_INTEGERS],
    "text": ["x" * (MAX_STRING + 1), "é" * (MAX_STRING + 1), "😀" * (MAX_STRING + 1), *NOT_TEXT],
    "name": [
        "",
        "x" * 65,
        "a.b",
        "a*",
        ">",
        "a b",
        "a\n",
        "\n",
        "é",
        "١",  # a digit, but not an ASCII one
        "a\x00",
        *NOT_TEXT,
    ],
    "bytes": ["x", None, 1, True, [b"x"]],
    "bytes or nil": ["x", 1, False, [b"x"]],
    "string or nil": [b"x", 1, False, ["x"]],
    "boolean": [0, 1, None, "true", b"\x01", 1.0],
    "boolean or nil": [0, 1, "true", b"\x01", 1.0, []],
    "text or nil": ["x" * (MAX_STRING + 1), b"x", 1, True, ["x"], {"x": 1}],
    "outcome": [LAST_OUTCOME + 1, 255, -1, MAX_INTEGER, True, *NOT_INTEGERS],
}
# A message of each kind with every field this release reads: the first of LATER_SENT, else of SENT.
FIRST_OF_KIND = {sent[0]: sent for sent in reversed([*LATER_SENT.values(), *SENT.values()])}
FIELD_CASES = [(kind, index) for kind, rules in LAYOUTS.items() for index in range(1, len(rules) + 1)]


def with_field(kind: int, index: int, value: Any) -> list:
    """A message of `kind` with its field `index` (1 is the first after the kind) set to `value`."""
    message = list(FIRST_OF_KIND[kind])
    message[index] = value
    return message


@pytest.mark.parametrize(("kind", "index"), FIELD_CASES, ids=[f"kind {k} field {i}" for k, i in FIELD_CASES])
def test_each_field_takes_the_values_its_rule_allows_and_no_other(kind, index):
    rule = LAYOUTS[kind][index - 1]
    for value in TAKEN[rule]:
        outcome, message = verdict(with_field(kind, index, value))
        assert outcome == "taken", (rule, value)
        assert msgspec.structs.astuple(message)[index - 1] == value
    for value in DROPPED[rule]:
        outcome, detail = verdict(with_field(kind, index, value))
        assert outcome == "malformed", (rule, value)
        assert detail.startswith(f"a message of kind {kind}: "), detail


@pytest.mark.parametrize("kind", ["1", "", True, False, 1.0, 3.0, None, [1], {"kind": 1}, b"\x01"])
def test_a_message_whose_kind_is_no_integer_is_malformed(kind):
    outcome, detail = verdict([kind, "b1c2d3e4f5a6", WIRE_VERSION])
    assert outcome == "malformed" and detail.startswith("no kind: "), detail


@pytest.mark.parametrize("message", [[], 6, "beat", None, True, b"\x93", {"kind": 6}, 1.5])
def test_a_message_that_is_no_array_of_a_kind_and_fields_is_malformed(message):
    outcome, detail = verdict(message)
    assert outcome == "malformed" and detail.startswith("no kind: Expected `array`"), detail


def test_details_say_what_was_wrong():
    assert (
        verdict([BEAT, "b1c2d3e4f5a6", True])[1]
        == "a message of kind 6: Expected `int`, got `bool` - at `$[2]`"
    )
    assert verdict([BEAT, "b1c2d3e4f5a6", -1])[1] == "a message of kind 6: Expected `int` >= 0 - at `$[2]`"
    assert verdict([BEAT, "a.b", 2])[1] == (
        "a message of kind 6: the sending instance's ID is not 1-64 letters, digits, `_` or `-`"
    )
    assert verdict([ERROR, "app-1", "1", "text", LAST_OUTCOME + 1])[1] == (
        f"a message of kind 5: Expected `int` <= {LAST_OUTCOME} - at `$[4]`"
    )
    assert verdict([])[1] == "no kind: Expected `array` of at least length 1, got 0"


def test_a_message_naming_no_instance_cannot_be_made_either():
    for name in DROPPED["name"]:
        if isinstance(name, str) and 1 <= len(name) <= 64:
            with pytest.raises(ValueError, match="1-64 letters, digits"):
                Beat(instance=name, wire_version=WIRE_VERSION)


# -- one NATS payload -------------------------------------------------------------------------------


def test_a_bad_message_among_good_ones_drops_only_itself():
    good = [message for _, _, message in WIRE_2_BYTES.values()]
    mixed = [SENT["call"], [BEAT, "a.b", 2], SENT["result"], [99, "later"], 5, SENT["beat"], [ERROR, "x"]]
    messages, dropped = decode_batch(payload(*mixed))
    assert messages == [good[3], good[4], good[6]]
    assert dropped == [
        "a message of kind 6: the sending instance's ID is not 1-64 letters, digits, `_` or `-`",
        "no kind: Expected `array`, got `int`",
        "a message of kind 5: Expected `array` of at least length 5, got 2",
    ]


def test_a_batch_of_later_kinds_and_good_messages_counts_nothing():
    messages, dropped = decode_batch(payload([42, 1, 2], SENT["beat"], [43]))
    assert messages == [WIRE_2_BYTES["beat"][2]] and dropped == []


def test_a_message_with_a_string_that_is_not_utf8_drops_only_itself():
    bad = b"\x93\x06\xa2\xff\xfe\x02"  # a heartbeat whose instance is no UTF-8
    messages, dropped = decode_batch(b"\x92" + bad + payload(SENT["beat"])[1:])
    assert messages == [WIRE_2_BYTES["beat"][2]]
    assert len(dropped) == 1 and dropped[0].startswith("a message of kind 6: "), dropped


def test_a_view_of_a_buffer_reads_as_its_bytes_and_nothing_read_keeps_it():
    buffer = bytearray(payload(SENT["call"], [BEAT, "a.b", 2], SENT["result"]))
    messages, dropped = decode_batch(memoryview(buffer))
    buffer[:] = bytes(len(buffer))  # what was read must not change with the buffer
    assert messages == [WIRE_2_BYTES["call"][2], WIRE_2_BYTES["result"][2]] and len(dropped) == 1


def test_an_empty_payload_array_holds_no_message():
    assert decode_batch(b"\x90") == ([], [])


DEEP = b"\x91" * 100_000 + b"\x01"
# A heartbeat, and one whose field of a later release is nested past msgspec's depth: MessagePack
# cannot be split into its messages without reading each to its end, so both are lost.
NESTED_IN_ONE = b"\x92" + payload(SENT["beat"])[1:] + b"\x94\x06\xa1x\x02" + DEEP


@pytest.mark.parametrize(
    "on_the_bus",
    [
        b"",
        b"\xc1",  # no MessagePack type
        b"\x01",  # a number, not an array
        b"\x81\xa1a\x01",  # a map
        payload(SENT["beat"])[:-1],  # truncated
        payload(SENT["beat"]) + b"\x01",  # trailing bytes
        b"\xdd\xff\xff\xff\xff",  # an array of four billion messages, without them
        b"\x91" + b"\xd9\x05ab",  # a message cut short inside a string
        DEEP,
        NESTED_IN_ONE,
    ],
)
def test_a_payload_that_is_no_array_of_messages_is_one_malformed_message(on_the_bus):
    messages, dropped = decode_batch(on_the_bus)
    assert messages == [] and len(dropped) == 1 and dropped[0].startswith("not MessagePack messages: ")


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(st.binary(max_size=64))
def test_no_bytes_make_it_raise(on_the_bus):
    messages, dropped = decode_batch(on_the_bus)
    assert all(type(message) in wire.KINDS.values() for message in messages)
    assert all(isinstance(detail, str) and detail for detail in dropped)


# -- the rules, against random messages -------------------------------------------------------------

VALID = {
    "integer": st.integers(0, MAX_INTEGER) | st.sampled_from([0, MAX_INTEGER]),
    "text": st.text(max_size=40) | st.sampled_from(TAKEN["text"]),
    "name": st.from_regex(r"[0-9A-Za-z_-]{1,64}", fullmatch=True),
    "bytes": st.binary(max_size=40),
    "bytes or nil": st.none() | st.binary(max_size=40),
    "string or nil": st.none() | st.text(max_size=40) | st.sampled_from(TAKEN["string or nil"]),
    "boolean": st.booleans(),
    "boolean or nil": st.none() | st.booleans(),
    "text or nil": st.none() | st.text(max_size=40) | st.sampled_from(TAKEN["text or nil"]),
    "outcome": st.integers(0, LAST_OUTCOME),
}
ANYTHING = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([0, 1, LAST_OUTCOME, LAST_OUTCOME + 1, MAX_INTEGER, MAX_INTEGER + 1, -1, 3.0, 4.0]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.sampled_from(TAKEN["text"] + DROPPED["text"] + TAKEN["name"] + DROPPED["name"]),
    st.binary(max_size=6),
    st.lists(st.integers(-5, 5), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-5, 5), max_size=1),
)
EXTRA = st.lists(ANYTHING, max_size=3)
EDGES = st.sampled_from([value for values in (*TAKEN.values(), *DROPPED.values()) for value in values])


@st.composite
def valid_messages(draw: st.DrawFn, kind: int | None = None) -> tuple:
    """A message that this release takes, maybe with a later release's fields."""
    kind = draw(st.sampled_from(sorted(LAYOUTS))) if kind is None else kind
    fields = tuple(draw(VALID[rule]) for rule in LAYOUTS[kind])
    return (kind, *fields, *draw(EXTRA))


@st.composite
def any_messages(draw: st.DrawFn) -> list:
    """A valid message, or one with a field replaced (often by an edge of its rule), cut short, or of another kind."""
    message = list(draw(valid_messages()))
    change = draw(st.sampled_from(["none", "edge", "field", "fields", "cut", "kind"]))
    if change == "edge":
        index = draw(st.integers(1, len(LAYOUTS[message[0]])))
        rule = LAYOUTS[message[0]][index - 1]
        message[index] = draw(st.sampled_from(TAKEN[rule] + DROPPED[rule]) | EDGES)
    elif change == "field":
        message[draw(st.integers(0, len(message) - 1))] = draw(ANYTHING)
    elif change == "fields":
        message = [message[0], *draw(st.lists(ANYTHING, max_size=8))]
    elif change == "cut":
        message = message[: draw(st.integers(0, len(message) - 1))]
    elif change == "kind":
        message[0] = draw(ANYTHING)
    return message


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(valid_messages())
def test_any_message_the_rules_allow_reads_as_its_fields_and_is_written_back_the_same(message):
    kind = message[0]
    size = len(LAYOUTS[kind])
    outcome, read = verdict(message)
    assert outcome == "taken" and type(read) is wire.KINDS[kind]
    assert msgspec.structs.astuple(read) == message[1 : size + 1]
    assert encode([read]) == payload(message[: size + 1])


# -- what the directory sends ------------------------------------------------------------------------


class RecordingBus:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def send(self, subject: str, message: Any) -> None:
        self.sent.append((subject, message))


def test_what_the_directory_sends_reads_as_the_message_it_means():
    """Each kind as core/directory.py sends it, through MessagePack: its fields where the Structs name them."""
    bus = RecordingBus()
    bridge = make_bridge()
    directory = bridge.router = Directory(bridge, bus, "b1c2d3e4f5a6", first_epoch=EPOCH - 1)
    directory.bus_up(NOW)
    directory.on_timer(NOW + 1)
    channel, _ = connect(bridge, "app-1")
    register(channel, tool("echo"), instructions="Say hello.")
    directory.cancel_elsewhere("app-1", b'"req-9"', b"6b3c9e")
    forwarding = directory.forwarding
    subject = directory.instance_subject("0a1b2c3d4e5f")
    remote = RemoteApp(forwarding, "app-2", "0a1b2c3d4e5f", 7, 0, subject)
    remote.send(CALL)
    remote.consent = True  # as its instance's STATE said
    assert remote.ask_consent(REQUEST_ID, "Claude", "https://claude.ai", "HJK2M3NP") is None
    asked = Authorize(
        client_id="app-3",
        epoch=9,
        instance="0a1b2c3d4e5f",
        request_id=REQUEST_ID,
        client_name=None,
        client_uri="https://claude.ai",
        code="HJK2M3NP",
    )
    forwarding.authorize(asked, None, subject, NOW)  # app-3's connection of epoch 9 is not here
    forwarded = ForwardedCall(forwarding, "0a1b2c3d4e5f", "0a1b2c3d4e5f-1", "app-1", subject)
    forwarded.call_result(b'{"content":[]}', True)
    forwarded.outcome = Outcome.TIMEOUT
    forwarded.call_error("late")
    bridge.detach(channel, NOW)
    messages, dropped = decode_batch(encode([message for _, message in bus.sent]))
    assert dropped == [] and len(messages) == len(bus.sent)
    me = "b1c2d3e4f5a6"
    assert messages == [
        Sync(instance=me, seq=1, wire_version=WIRE_VERSION, answer=True),
        Beat(instance=me, wire_version=WIRE_VERSION),
        State(
            client_id="app-1", epoch=EPOCH, instance=me, tools=None, instructions=None, seq=2, consent=False
        ),
        State(
            client_id="app-1",
            epoch=EPOCH,
            instance=me,
            tools=TOOLS,
            instructions="Say hello.",
            seq=3,
            consent=False,
        ),
        Cancel(client_id="app-1", request_id=b'"req-9"', session=b"6b3c9e", instance=me),
        ToApp(
            instance=me, client_id="app-2", epoch=7, message=CALL, timeout_ms=forwarding.timeout_ms, floor=0
        ),
        Authorize(
            client_id="app-2",
            epoch=7,
            instance=me,
            request_id=REQUEST_ID,
            client_name="Claude",
            client_uri="https://claude.ai",
            code="HJK2M3NP",
        ),
        Consent(
            client_id="app-3",
            epoch=9,
            instance=me,
            request_id=REQUEST_ID,
            allow=False,
            problem="it is not connected to this bridge",
        ),
        Result(client_id="app-1", call_id="0a1b2c3d4e5f-1", result=b'{"content":[]}', has_result_type=True),
        Error(client_id="app-1", call_id="0a1b2c3d4e5f-1", text="late", outcome=Outcome.TIMEOUT),
        Gone(client_id="app-1", epoch=EPOCH, instance=me, seq=4),
    ]
