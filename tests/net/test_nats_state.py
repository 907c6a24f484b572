"""The keys and values of the generations bucket (net/nats_state.py; docs/configuration.md, Revocation).

A key is `role.<hex of the client ID's UTF-8>`: every client ID the protocol allows (ClientMCP
v1 §2: 1-128 of `A-Z a-z 0-9 _ - . : @`) gets one key that NATS accepts, no two IDs share one,
and no ID's `.` makes a key of another role or a wildcard. A value is the generation in ASCII.
The bucket and the state file implement the ports of generation_store.py, never importing each
other, and their followers start and stop alike.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest

import clientmcp_fast
from clientmcp_fast.core.generations import MAX_GENERATION
from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN
from clientmcp_fast.net.nats_state import (
    generation_key,
    generation_value,
    key_fields,
    parse_generation,
    where,
)

# nats-py's own check of a key, as `put` and `update` apply it (the server takes the same alphabet).
nats_kv = pytest.importorskip("nats.js.kv", reason="--state nats needs nats-py")


CLIENT_IDS = [
    "alice",
    "a",
    "a.b",
    "a.b.c",
    "a_b",
    "a:b",
    "a@b",
    "a-b",
    ".",
    "..",
    ">",  # not a client ID, but never a wildcard either (checked below)
    "team.one:user@example-app_1",
    "Z" * 128,
    "0",
]


@pytest.mark.parametrize("role", ["client", "agent"])
def test_every_client_id_has_one_valid_key_that_reads_back(role):
    keys = set()
    for client_id in CLIENT_IDS:
        key = generation_key(role, client_id)
        assert nats_kv._is_key_valid(key), key  # what nats-py and the server accept
        assert key.count(".") == 1 and not key.endswith(("*", ">"))
        if CLIENT_ID_PATTERN.fullmatch(client_id):
            assert key_fields(key) == (role, client_id)
        else:
            assert key_fields(key) is None
        keys.add(key)
    assert len(keys) == len(CLIENT_IDS)


def test_the_key_is_the_role_and_the_hex_of_the_id():
    assert generation_key("client", "alice") == "client.616c696365"
    assert generation_key("agent", "a.b") == "agent.612e62"
    assert generation_key("client", "a") != generation_key("agent", "a")
    with pytest.raises(ValueError):
        generation_key("robot", "alice")


@pytest.mark.parametrize(
    "key",
    [
        "client",
        "client.",
        "robot.61",
        "Client.61",
        "client.6",  # odd length
        "client.6G",
        "client.6C",  # upper case: not the spelling this bridge writes
        "client.61.62",
        "client.2020",  # two spaces: not a client ID
        "client.ff",  # not UTF-8
        "client.c3a9",  # "é": UTF-8, not a client ID
        "agent." + "61" * 129,  # 129 characters
    ],
)
def test_keys_this_bridge_never_writes_are_not_read(key):
    assert key_fields(key) is None


def test_values_are_plain_decimal_generations():
    assert generation_value(0) == b"0"
    assert generation_value(17) == b"17"
    for generation in (0, 1, 17, MAX_GENERATION):
        assert parse_generation(generation_value(generation)) == generation
    for value in (
        None,
        b"",
        b"-1",
        b"+1",
        b"01",
        b"1.0",
        b" 1",
        b"1\n",
        b"one",
        b"\xff",
        str(MAX_GENERATION + 1).encode(),
    ):
        assert parse_generation(value) is None, value


def test_servers_are_named_without_credentials():
    assert where(("nats://user:secret@10.0.0.1:4222", "tls://token@[::1]:4443", "nats://h:4222")) == (
        "nats://10.0.0.1:4222, tls://[::1]:4443, nats://h:4222"
    )


class _RacedBucket:
    """A bucket another writer always updates between our read and our write."""

    def __init__(self) -> None:
        self.revision = 0
        self.writes = 0

    async def get(self, key: str):
        import nats.js.errors

        raise nats.js.errors.KeyNotFoundError

    async def update(self, key: str, value: bytes, last: int) -> int:
        import nats.js.errors

        self.writes += 1
        raise nats.js.errors.KeyWrongLastSequenceError


def test_a_revoke_gives_up_after_losing_every_race_of_its_bound():
    """RAISE_ATTEMPTS compare-and-set writes lost in a row: a clear error, no endless loop."""
    from clientmcp_fast.net.nats_state import RAISE_ATTEMPTS, NatsStateError, raise_generation

    bucket = _RacedBucket()
    with pytest.raises(
        NatsStateError, match=f"{RAISE_ATTEMPTS} other writers of client.616c696365 won in a row"
    ):
        asyncio.run(raise_generation(bucket, "client", "alice"))
    assert bucket.writes == RAISE_ATTEMPTS


# -- the bucket beside the file: one interface, no import between them ----------------------------


def _imported_names(path: Path) -> set[str]:
    """Every module a source file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_bucket_and_the_file_share_the_store_module_and_never_import_each_other():
    """state.py alone picks one from the --state value; net/nats_state.py and the ports never import it."""
    package = Path(clientmcp_fast.__file__).parent
    assert "clientmcp_fast.generation_store" in _imported_names(package / "net" / "nats_state.py")
    assert "clientmcp_fast.generation_store" in _imported_names(package / "state.py")
    assert "clientmcp_fast.state" not in _imported_names(package / "net" / "nats_state.py")
    ports = _imported_names(package / "generation_store.py")
    assert not ports & {"clientmcp_fast.state", "clientmcp_fast.net.nats_state"}, ports


def test_both_followers_start_and_stop_alike_and_the_state_value_picks_one(tmp_path: Path):
    """net/server.py starts and stops whichever follower `new_follower` made, the same way."""
    from clientmcp_fast.generation_store import GenerationFollower
    from clientmcp_fast.net.nats_state import NatsGenerationFollower, NatsStateError
    from clientmcp_fast.state import FileGenerationFollower, new_follower

    for follower in (FileGenerationFollower, NatsGenerationFollower):
        for name in ("start", "stop"):
            method = getattr(follower, name)
            assert inspect.iscoroutinefunction(method), (follower, name)
            assert inspect.signature(method) == inspect.signature(getattr(GenerationFollower, name))
    loop = asyncio.new_event_loop()
    try:
        made = new_follower(str(tmp_path / "state.db"), None, None, None, loop)  # type: ignore[arg-type]
        assert type(made) is FileGenerationFollower
        loop.run_until_complete(made.stop())
        made = new_follower("nats", None, None, None, loop)  # type: ignore[arg-type]
        assert type(made) is NatsGenerationFollower
        with pytest.raises(NatsStateError, match="--state nats needs the NATS servers"):
            loop.run_until_complete(made.start())
    finally:
        loop.close()
