"""The frame parser and builders of RFC 6455 §5, run against every available twin (pure, compiled).

Client frames are built, and server frames read back, by `tests/wire.py`, not by the
package, so neither side of a check trusts the code under test.
"""

from __future__ import annotations

import importlib
import random
from types import ModuleType

import pytest
from wire import MASK, Op, client_frame, client_header, decode_server_frames, mask_payload

from clientmcp_fast._pure.errors import FrameError
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.speedups import EXACT_PING, EXACT_PONG, OP_EXACT_PING, PONG_FRAME

EXACT_PING_BYTES = b'{"type":"ping"}'


def _implementations() -> list[ModuleType]:
    modules = [importlib.import_module("clientmcp_fast._pure.frames")]
    try:
        modules.append(importlib.import_module("clientmcp_fast._speedups.frames"))
    except ImportError:
        pass
    return modules


IMPLEMENTATIONS = _implementations()


IMPLEMENTATION_IDS = ["pure" if "._pure." in module.__name__ else "compiled" for module in IMPLEMENTATIONS]


@pytest.fixture(params=IMPLEMENTATIONS, ids=IMPLEMENTATION_IDS)
def frames(request: pytest.FixtureRequest) -> ModuleType:
    """One implementation of the frames module; every test runs against each."""
    return request.param


def frame_stream(rng: random.Random) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """Many client frames of every length form, with the frames the parser must return for them."""
    specs: list[tuple[int, bool, bytes]] = [
        (Op.TEXT, True, b"hello"),
        (Op.BINARY, True, b""),
        (Op.TEXT, True, b""),
        (Op.TEXT, True, b"x" * 125),
        (Op.BINARY, True, bytes(range(126))),
        (Op.TEXT, True, b"z" * 127),
        (Op.TEXT, False, b"frag-1 "),
        (Op.PING, True, b"mid-message ping"),
        (Op.CONTINUATION, False, b"frag-2 "),
        (Op.PONG, True, b""),
        (Op.CONTINUATION, True, b"frag-3"),
        (Op.BINARY, True, bytes(rng.randrange(256) for _ in range(65535))),
        (Op.TEXT, True, EXACT_PING_BYTES),
        (Op.BINARY, True, bytes(rng.randrange(256) for _ in range(65536))),
        (Op.PING, True, b"p" * 125),
        (Op.TEXT, True, "€ und ü".encode()),
        (Op.CLOSE, True, b"\x03\xe8bye"),
    ]
    stream = b""
    expected = []
    for opcode, fin, payload in specs:
        mask = bytes(rng.randrange(256) for _ in range(4))
        stream += client_frame(opcode, payload, fin=fin, mask=mask)
        if opcode == Op.TEXT and fin and payload == EXACT_PING_BYTES:
            expected.append(("exact-ping", 1, b""))
        else:
            expected.append((opcode, int(fin), payload))
    return stream, expected


def normalise(parsed: list[tuple[int, int, bytes]]) -> list[tuple[object, int, bytes]]:
    """Parsed frames with the pseudo-opcode named, fin as 0/1 and payloads as bytes."""
    return [
        ("exact-ping" if op == OP_EXACT_PING else op, int(bool(fin)), bytes(payload))
        for op, fin, payload in parsed
    ]


def feed_in_chunks(frames: ModuleType, data: bytes, sizes: list[int]) -> list[tuple[int, int, bytes]]:
    """Feed `data` in chunks of the given sizes (the last one takes the rest)."""
    reader = frames.FrameReader(MAX_MESSAGE_BYTES)
    parsed = []
    pos = 0
    for size in sizes:
        parsed += reader.feed(data[pos : pos + size])
        pos += size
    parsed += reader.feed(data[pos:])
    return parsed


class TestMasking:
    """RFC 6455 §5.3: client-to-server masking."""

    @pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 8, 9, 125, 1000])
    def test_unmask_matches_an_independent_xor(self, frames: ModuleType, length: int) -> None:
        payload = bytes((i * 7 + 3) % 256 for i in range(length))
        masked = mask_payload(payload, MASK)
        assert length == 0 or masked != payload
        assert frames.unmask(masked, MASK) == payload

    def test_unmask_with_a_zero_key_is_identity(self, frames: ModuleType) -> None:
        assert frames.unmask(b"abcdef", b"\x00\x00\x00\x00") == b"abcdef"

    def test_parser_unmasks_with_each_frames_own_key(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        data = client_frame(Op.TEXT, b"same text", mask=b"\x01\x02\x03\x04") + client_frame(
            Op.TEXT, b"same text", mask=b"\xff\xee\xdd\xcc"
        )
        assert normalise(reader.feed(data)) == [(Op.TEXT, 1, b"same text"), (Op.TEXT, 1, b"same text")]

    def test_unmasked_client_frame_is_a_1002(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        with pytest.raises(FrameError) as info:
            reader.feed(client_frame(Op.TEXT, b"hi", mask=None))
        assert info.value.code == 1002


class TestBaseFraming:
    """RFC 6455 §5.2: the frame header, the three length forms, and stream reassembly."""

    @pytest.mark.parametrize("length", [0, 1, 125, 126, 127, 65535, 65536, 70000])
    def test_each_length_boundary_parses(self, frames: ModuleType, length: int) -> None:
        payload = bytes(i % 251 for i in range(length))
        data = client_frame(Op.BINARY, payload)
        expected_head = 6 if length < 126 else 8 if length < 65536 else 14
        assert len(data) == expected_head + length
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(data)) == [(Op.BINARY, 1, payload)]

    @pytest.mark.parametrize("width", [16, 64])
    def test_longer_length_form_than_needed_is_still_read(self, frames: ModuleType, width: int) -> None:
        data = client_header(Op.BINARY, 5, width=width) + mask_payload(b"short", MASK)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(data)) == [(Op.BINARY, 1, b"short")]

    def test_zero_length_frames_of_every_kind(self, frames: ModuleType) -> None:
        data = b"".join(client_frame(op) for op in (Op.TEXT, Op.BINARY, Op.PING, Op.PONG, Op.CLOSE))
        data += client_frame(Op.TEXT, fin=False) + client_frame(Op.CONTINUATION)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(data)) == [
            (Op.TEXT, 1, b""),
            (Op.BINARY, 1, b""),
            (Op.PING, 1, b""),
            (Op.PONG, 1, b""),
            (Op.CLOSE, 1, b""),
            (Op.TEXT, 0, b""),
            (Op.CONTINUATION, 1, b""),
        ]

    def test_several_frames_in_one_chunk_come_out_in_order(self, frames: ModuleType) -> None:
        data = (
            client_frame(Op.TEXT, b"one") + client_frame(Op.BINARY, b"two") + client_frame(Op.PING, b"three")
        )
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(data)) == [
            (Op.TEXT, 1, b"one"),
            (Op.BINARY, 1, b"two"),
            (Op.PING, 1, b"three"),
        ]

    def test_partial_frame_is_kept_until_completed(self, frames: ModuleType) -> None:
        data = client_frame(Op.TEXT, b"complete") + client_frame(Op.BINARY, b"x" * 300)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        cut = len(client_frame(Op.TEXT, b"complete")) + 5  # inside the second frame's extended header
        assert normalise(reader.feed(data[:cut])) == [(Op.TEXT, 1, b"complete")]
        assert reader.feed(data[cut:-1]) == []
        assert normalise(reader.feed(data[-1:])) == [(Op.BINARY, 1, b"x" * 300)]
        assert reader.feed(b"") == []

    def test_one_byte_at_a_time_gives_the_same_frames_as_all_at_once(self, frames: ModuleType) -> None:
        stream, expected = frame_stream(random.Random(6455))
        at_once = normalise(frames.FrameReader(MAX_MESSAGE_BYTES).feed(stream))
        assert at_once == expected
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        byte_by_byte = []
        for i in range(len(stream)):
            byte_by_byte += reader.feed(stream[i : i + 1])
        assert normalise(byte_by_byte) == expected

    def test_random_chunkings_give_the_same_frames(self, frames: ModuleType) -> None:
        rng = random.Random(20111211)
        stream, expected = frame_stream(rng)
        for _ in range(25):
            largest = rng.choice([3, 17, 200, 5000, 70000])
            sizes = []
            total = 0
            while total < len(stream):
                sizes.append(rng.randint(1, largest))
                total += sizes[-1]
            assert normalise(feed_in_chunks(frames, stream, sizes)) == expected, sizes

    def test_bytearray_input_is_read_like_bytes(self, frames: ModuleType) -> None:
        data = client_frame(Op.TEXT, b"abc") + client_frame(Op.BINARY, b"defg")
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        parsed = reader.feed(bytearray(data[:4])) + reader.feed(bytearray(data[4:]))
        assert normalise(parsed) == [(Op.TEXT, 1, b"abc"), (Op.BINARY, 1, b"defg")]


class TestExactPing:
    """ClientMCP v1 §3.2, docs/protocol.md: only a FIN text frame of exactly `{"type":"ping"}` is the fast ping."""

    def test_exact_ping_text_frame_becomes_the_pseudo_opcode(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert reader.feed(client_frame(Op.TEXT, EXACT_PING_BYTES)) == [(OP_EXACT_PING, 1, b"")]

    def test_pseudo_opcode_is_outside_the_wire_range(self) -> None:
        assert OP_EXACT_PING > 0x0F

    def test_exact_ping_is_found_whatever_the_mask(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        for mask in (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x12\x34\x56\x78"):
            assert reader.feed(client_frame(Op.TEXT, EXACT_PING_BYTES, mask=mask)) == [
                (OP_EXACT_PING, 1, b"")
            ]

    def test_exact_ping_split_across_feeds_is_still_found(self, frames: ModuleType) -> None:
        data = client_frame(Op.TEXT, EXACT_PING_BYTES)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert reader.feed(data[:9]) == []
        assert reader.feed(data[9:]) == [(OP_EXACT_PING, 1, b"")]

    def test_fragmented_text_with_the_ping_bytes_is_plain_text(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        parsed = reader.feed(
            client_frame(Op.TEXT, EXACT_PING_BYTES, fin=False) + client_frame(Op.CONTINUATION, b"")
        )
        assert normalise(parsed) == [(Op.TEXT, 0, EXACT_PING_BYTES), (Op.CONTINUATION, 1, b"")]

    def test_final_continuation_with_the_ping_bytes_is_not_the_fast_ping(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        parsed = reader.feed(
            client_frame(Op.TEXT, b"", fin=False) + client_frame(Op.CONTINUATION, EXACT_PING_BYTES)
        )
        assert normalise(parsed) == [(Op.TEXT, 0, b""), (Op.CONTINUATION, 1, EXACT_PING_BYTES)]

    @pytest.mark.parametrize(
        "payload",
        [
            b'{"type": "ping"}',
            b' {"type":"ping"}',
            b'{"type":"ping"}\n',
            b'{"type":"Ping"}',
            b'{"type":"ping"',
            b'{"type":"ping","x":1}',
        ],
    )
    def test_near_misses_are_plain_text(self, frames: ModuleType, payload: bytes) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(client_frame(Op.TEXT, payload))) == [(Op.TEXT, 1, payload)]

    @pytest.mark.parametrize("opcode", [Op.BINARY, Op.PING, Op.PONG])
    def test_ping_bytes_in_other_opcodes_are_not_the_fast_ping(self, frames: ModuleType, opcode: int) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(client_frame(opcode, EXACT_PING_BYTES))) == [
            (opcode, 1, EXACT_PING_BYTES)
        ]


class TestFramingErrors:
    """RFC 6455 §5.2, §5.5, docs/protocol.md: a broken frame is a FrameError with the close code to send."""

    def _error(self, frames: ModuleType, data: bytes, max_payload: int = MAX_MESSAGE_BYTES) -> FrameError:
        reader = frames.FrameReader(max_payload)
        with pytest.raises(FrameError) as info:
            reader.feed(data)
        return info.value

    def test_frames_before_the_error_in_the_same_read_come_with_it(self, frames: ModuleType) -> None:
        error = self._error(
            frames,
            client_frame(Op.TEXT, b"first")
            + client_frame(Op.PING, b"p")
            + client_frame(Op.TEXT, b"x", mask=None),
        )
        assert error.code == 1002
        assert error.frames == [(Op.TEXT, 1, b"first"), (Op.PING, 1, b"p")]

    def test_frames_of_earlier_reads_are_not_repeated_with_the_error(self, frames: ModuleType) -> None:
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert reader.feed(client_frame(Op.TEXT, b"first")) == [(Op.TEXT, 1, b"first")]
        with pytest.raises(FrameError) as info:
            reader.feed(client_frame(Op.TEXT, b"x", mask=None))
        assert info.value.frames == []

    @pytest.mark.parametrize("rsv", [0x40, 0x20, 0x10, 0x70])
    def test_reserved_bits_are_a_1002(self, frames: ModuleType, rsv: int) -> None:
        error = self._error(frames, client_frame(Op.TEXT, b"hi", rsv=rsv))
        assert error.code == 1002
        assert error.reason

    @pytest.mark.parametrize("opcode", [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF])
    def test_unknown_opcodes_are_a_1002(self, frames: ModuleType, opcode: int) -> None:
        assert self._error(frames, client_frame(opcode, b"hi")).code == 1002

    def test_error_is_raised_from_the_first_two_bytes(self, frames: ModuleType) -> None:
        # A bad header must not wait for a payload that may never come.
        assert self._error(frames, bytes((0x80 | 0x3, 0x80 | 100))).code == 1002
        assert self._error(frames, bytes((0x81, 100))).code == 1002

    def test_unmasked_frame_is_a_1002(self, frames: ModuleType) -> None:
        assert self._error(frames, client_frame(Op.BINARY, b"data", mask=None)).code == 1002

    @pytest.mark.parametrize("opcode", [Op.CLOSE, Op.PING, Op.PONG])
    def test_control_frame_of_126_bytes_is_a_1002(self, frames: ModuleType, opcode: int) -> None:
        assert self._error(frames, client_frame(opcode, b"\x03\xe8" + b"r" * 124)).code == 1002

    @pytest.mark.parametrize("opcode", [Op.CLOSE, Op.PING, Op.PONG])
    def test_control_frame_of_125_bytes_is_accepted(self, frames: ModuleType, opcode: int) -> None:
        payload = b"\x03\xe8" + b"r" * 123
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert normalise(reader.feed(client_frame(opcode, payload))) == [(opcode, 1, payload)]

    def test_oversized_control_frame_is_refused_from_its_header(self, frames: ModuleType) -> None:
        assert self._error(frames, client_header(Op.PING, 126)).code == 1002

    @pytest.mark.parametrize("opcode", [Op.CLOSE, Op.PING, Op.PONG])
    def test_fragmented_control_frame_is_a_1002(self, frames: ModuleType, opcode: int) -> None:
        assert self._error(frames, client_frame(opcode, b"x", fin=False)).code == 1002

    def test_64_bit_length_with_its_most_significant_bit_is_a_1002(self, frames: ModuleType) -> None:
        assert self._error(frames, client_header(Op.BINARY, 1 << 63, width=64)).code == 1002
        assert self._error(frames, client_header(Op.BINARY, (1 << 64) - 1, width=64)).code == 1002

    @pytest.mark.parametrize("opcode", [Op.TEXT, Op.BINARY, Op.CONTINUATION])
    def test_data_frame_over_4_mib_is_a_1009_from_the_header_alone(
        self, frames: ModuleType, opcode: int
    ) -> None:
        header = client_header(opcode, MAX_MESSAGE_BYTES + 1, fin=opcode != Op.CONTINUATION)
        assert len(header) == 14
        assert self._error(frames, header).code == 1009

    def test_data_frame_of_exactly_4_mib_is_accepted(self, frames: ModuleType) -> None:
        payload = bytes(i % 253 for i in range(MAX_MESSAGE_BYTES))
        data = client_frame(Op.BINARY, payload)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        assert reader.feed(data[:14]) == []
        assert normalise(reader.feed(data[14:])) == [(Op.BINARY, 1, payload)]

    def test_payload_limit_is_the_readers_own(self, frames: ModuleType) -> None:
        assert self._error(frames, client_header(Op.TEXT, 1001), max_payload=1000).code == 1009
        reader = frames.FrameReader(1000)
        assert normalise(reader.feed(client_frame(Op.TEXT, b"a" * 1000))) == [(Op.TEXT, 1, b"a" * 1000)]

    def test_error_after_good_frames_in_the_same_chunk_still_raises(self, frames: ModuleType) -> None:
        data = client_frame(Op.TEXT, b"fine") + client_frame(Op.TEXT, b"bad", mask=None)
        assert self._error(frames, data).code == 1002

    def test_error_split_across_feeds_is_raised_once_the_header_is_in(self, frames: ModuleType) -> None:
        header = client_header(Op.BINARY, MAX_MESSAGE_BYTES + 1)
        reader = frames.FrameReader(MAX_MESSAGE_BYTES)
        for i in range(len(header) - 1):
            assert reader.feed(header[i : i + 1]) == []
        with pytest.raises(FrameError) as info:
            reader.feed(header[-1:])
        assert info.value.code == 1009


class TestBuildingFrames:
    """RFC 6455 §5.2 and §5.5.1: server frames are unmasked, final, with the shortest length form."""

    @pytest.mark.parametrize("length", [0, 1, 125, 126, 65535, 65536, 100000])
    def test_build_frame_round_trips_at_each_length_boundary(self, frames: ModuleType, length: int) -> None:
        payload = bytes(i % 249 for i in range(length))
        data = frames.build_frame(Op.BINARY, payload)
        assert len(data) == (2 if length < 126 else 4 if length < 65536 else 10) + length
        assert decode_server_frames(data) == [(True, Op.BINARY, payload)]

    @pytest.mark.parametrize("opcode", [Op.TEXT, Op.BINARY, Op.CLOSE, Op.PING, Op.PONG])
    def test_build_frame_keeps_the_opcode(self, frames: ModuleType, opcode: int) -> None:
        assert decode_server_frames(frames.build_frame(opcode, b"body")) == [(True, opcode, b"body")]

    def test_build_frame_exact_bytes(self, frames: ModuleType) -> None:
        assert frames.build_frame(Op.TEXT, b"Hello") == b"\x81\x05Hello"
        assert frames.build_frame(Op.PONG, b"") == b"\x8a\x00"
        assert frames.build_frame(Op.BINARY, b"\x00" * 126)[:4] == b"\x82\x7e\x00\x7e"
        assert (
            frames.build_frame(Op.BINARY, b"\x00" * 65536)[:10] == b"\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00"
        )

    def test_build_close_exact_bytes(self, frames: ModuleType) -> None:
        assert frames.build_close(1000, b"") == b"\x88\x02\x03\xe8"
        assert frames.build_close(4409, b"replaced") == b"\x88\x0a\x11\x39replaced"

    @pytest.mark.parametrize("code", [1000, 1002, 1007, 1009, 4400, 4409, 4999])
    def test_build_close_round_trips_code_and_reason(self, frames: ModuleType, code: int) -> None:
        reason = "fermé".encode() * 20 + b"abc"
        assert len(reason) == 123
        [(fin, opcode, payload)] = decode_server_frames(frames.build_close(code, reason))
        assert (fin, opcode) == (True, Op.CLOSE)
        assert int.from_bytes(payload[:2], "big") == code
        assert payload[2:] == reason
        assert len(payload) == 125

    def test_pong_frame_constant_is_the_exact_pong_text(self) -> None:
        # One definition serves both twins, so this is not parametrized.
        assert decode_server_frames(PONG_FRAME) == [(True, Op.TEXT, b'{"type":"pong"}')]
        assert EXACT_PONG == b'{"type":"pong"}'
        assert EXACT_PING == EXACT_PING_BYTES
