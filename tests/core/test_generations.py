"""Token generations (ClientMCP v1 §2, docs/configuration.md, Revocation): every `gen` rule, both roles, both endpoints.

A token's `gen` (absent: 0) must equal the current generation of its client ID in its role;
anything but a non-negative integer is refused. Without generations, `gen` is ignored. The
client channel refuses with close 4401, the agent endpoint with HTTP 401 (ClientMCP v1 §3.3, §4).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from fakes import (
    NOW,
    SECRET,
    RecordingExchange,
    RecordingLink,
    connect,
    make_bridge,
    register,
    request_with_headers,
    tool,
)

from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.generations import (
    REVOKED_REASON,
    Generations,
    close_revoked_apps,
    generation_problem,
)
from clientmcp_fast.core.tokens import GEN_INVALID, TokenError, TokenVerifier, mint

LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
ABSENT = object()  # a token without a gen claim


def b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def gen_token(role: str, client_id: str, gen=ABSENT) -> str:
    """A token whose gen claim is `gen` as JSON (so 3.0, "3", true and null are sent as such)."""
    claims = {"sub": client_id, "role": role, "exp": int(NOW) + 3600}
    if gen is not ABSENT:
        claims["gen"] = gen
    signing_input = b64url(b'{"alg":"HS256","typ":"JWT"}') + b"." + b64url(json.dumps(claims).encode())
    signature = b64url(hmac.new(SECRET, signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + signature).decode("ascii")


def bridge_with(generations: Generations | None) -> Bridge:
    bridge = make_bridge()
    if generations is not None:
        generations.attach(bridge.verifier)
    return bridge


def agent_answer(bridge: Bridge, token: str) -> tuple[int, str]:
    """tools/list on /mcp with this agent token: (status, "ok" or the error message)."""
    headers = {
        b"content-type": b"application/json",
        b"accept": b"application/json",
        b"authorization": b"Bearer " + token.encode(),
    }
    exchange = RecordingExchange(request_with_headers(b"POST", b"/mcp", headers, (), LIST, True))
    AgentEndpoint(bridge, bridge.verifier, None).handle(exchange, b"", NOW)
    status, body = exchange.answer  # type: ignore[misc]
    return status, "ok" if status == 200 else json.loads(body)["error"]["message"]


def app_answer(bridge: Bridge, token: str) -> tuple[int, str] | None:
    """An app connecting to /connect with this client token: its close (code, reason), None if it stays."""
    link = RecordingLink()
    channel = AppChannel(bridge, link, NOW)
    channel.open(token, NOW)
    return link.close()


# (the claim, whether it is accepted when the current generation is 0, and when it is 3)
RULES = [
    pytest.param(ABSENT, True, False, id="absent"),
    pytest.param(0, True, False, id="zero"),
    pytest.param(3, False, True, id="three"),
    pytest.param(2, False, False, id="lower"),
    pytest.param(4, False, False, id="higher"),
    pytest.param(1, False, False, id="one"),
    pytest.param(-1, False, False, id="negative"),
    pytest.param(-3, False, False, id="negative-three"),
    pytest.param(0.0, False, False, id="float-zero"),
    pytest.param(3.0, False, False, id="float-three"),
    pytest.param(2.5, False, False, id="fraction"),
    pytest.param("0", False, False, id="string-zero"),
    pytest.param("3", False, False, id="string-three"),
    pytest.param(False, False, False, id="false"),
    pytest.param(True, False, False, id="true"),
    pytest.param(None, False, False, id="null"),
    pytest.param([3], False, False, id="array"),
    pytest.param(2**64 - 1, False, False, id="huge"),
]


def _expected_problem(gen, current: int) -> str:
    if type(gen) is not int and gen is not ABSENT or (type(gen) is int and gen < 0):
        return "token gen is not a non-negative integer"
    value = 0 if gen is ABSENT else gen
    if value < current:
        return f"token revoked: gen {value}, the current generation is {current}"
    return f"token gen {value} is ahead of the current generation {current}"


@pytest.mark.parametrize("current", [0, 3])
@pytest.mark.parametrize(("gen", "accepted_at_0", "accepted_at_3"), RULES)
class TestEveryRule:
    """Each claim against generation 0 (nothing kept) and 3, on each endpoint with its role."""

    def test_agent_endpoint(self, gen, accepted_at_0, accepted_at_3, current):
        bridge = bridge_with(Generations([("agent", "alice", current)]))
        accepted = accepted_at_3 if current else accepted_at_0
        answer = agent_answer(bridge, gen_token("agent", "alice", gen))
        if accepted:
            assert answer == (200, "ok")
        else:
            assert answer == (401, f"Unauthorized: {_expected_problem(gen, current)}")

    def test_client_channel(self, gen, accepted_at_0, accepted_at_3, current):
        bridge = bridge_with(Generations([("client", "alice", current)]))
        accepted = accepted_at_3 if current else accepted_at_0
        close = app_answer(bridge, gen_token("client", "alice", gen))
        if accepted:
            assert close is None
            assert "alice" in bridge.apps
        else:
            assert close == (4401, _expected_problem(gen, current))
            assert "alice" not in bridge.apps

    def test_without_generations_gen_is_ignored(self, gen, accepted_at_0, accepted_at_3, current):
        """No store: every gen claim, even a non-integer, is ignored (docs/configuration.md, Revocation)."""
        bridge = bridge_with(None)
        assert agent_answer(bridge, gen_token("agent", "alice", gen)) == (200, "ok")
        assert app_answer(bridge, gen_token("client", "alice", gen)) is None


def test_the_roles_have_their_own_generations():
    """Raising alice's agent generation leaves her client tokens alone, and the other way round."""
    bridge = bridge_with(Generations([("agent", "alice", 2)]))
    assert app_answer(bridge, gen_token("client", "alice", 0)) is None
    assert agent_answer(bridge, gen_token("agent", "alice", 0))[0] == 401
    assert agent_answer(bridge, gen_token("agent", "alice", 2)) == (200, "ok")
    bridge = bridge_with(Generations([("client", "alice", 2)]))
    assert agent_answer(bridge, gen_token("agent", "alice")) == (200, "ok")
    assert app_answer(bridge, gen_token("client", "alice"))[0] == 4401  # type: ignore[index]


def test_client_ids_have_their_own_generations():
    bridge = bridge_with(Generations([("agent", "alice", 1)]))
    assert agent_answer(bridge, gen_token("agent", "bob")) == (200, "ok")
    assert agent_answer(bridge, gen_token("agent", "alice"))[0] == 401


def test_a_cached_grant_is_refused_from_the_moment_its_generation_is_raised():
    """The verifier caches signatures, not decisions: the generation is compared on every check."""
    verifier = TokenVerifier([SECRET])
    generations = Generations()
    generations.attach(verifier)
    token = mint(SECRET, "agent", "alice", 3600, NOW, gen=0)
    assert verifier.verify(token, "agent", NOW) == "alice"
    assert token in verifier._cache
    generations.replace([("agent", "alice", 1)])
    with pytest.raises(TokenError, match="token revoked: gen 0, the current generation is 1"):
        verifier.verify(token, "agent", NOW)
    fresh = mint(SECRET, "agent", "alice", 3600, NOW, gen=1)
    assert verifier.verify(fresh, "agent", NOW) == "alice"


def test_turning_generations_on_applies_to_cached_grants():
    verifier = TokenVerifier([SECRET])
    token = gen_token("agent", "alice", "not a number")
    assert verifier.verify(token, "agent", NOW) == "alice"
    Generations().attach(verifier)
    with pytest.raises(TokenError, match="token gen is not a non-negative integer"):
        verifier.verify(token, "agent", NOW)


def test_the_grant_keeps_the_gen_read_from_the_token():
    verifier = TokenVerifier([SECRET])
    assert verifier._check_signature_and_claims(gen_token("agent", "a", 7)).gen == 7
    assert verifier._check_signature_and_claims(gen_token("agent", "a")).gen == 0
    assert verifier._check_signature_and_claims(gen_token("agent", "a", True)).gen == GEN_INVALID


def test_mint_writes_gen_only_when_asked():
    def claims_of(token: str) -> dict:
        return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))

    assert "gen" not in claims_of(mint(SECRET, "agent", "a", 60, NOW))
    assert claims_of(mint(SECRET, "agent", "a", 60, NOW, gen=0))["gen"] == 0
    assert claims_of(mint(SECRET, "client", "a", 60, NOW, gen=5))["gen"] == 5


# -- the table, and what a change does to connected apps ------------------------------------------


def test_replace_changes_the_table_the_verifier_holds_in_place():
    generations = Generations()
    verifier = TokenVerifier([SECRET])
    generations.attach(verifier)
    generations.replace([("agent", "a", 4)])
    assert verifier.generations is generations.tables
    assert verifier.generations == {"client": {}, "agent": {"a": 4}}


def test_replace_reports_what_changed_and_keeps_no_zeros():
    generations = Generations([("client", "a", 1), ("agent", "a", 0)])
    assert generations.tables == {"client": {"a": 1}, "agent": {}}
    changed = generations.replace([("client", "a", 1), ("agent", "a", 2), ("client", "b", 1)])
    assert sorted(changed) == [("agent", "a"), ("client", "b")]
    assert sorted(generations.replace([])) == [("agent", "a"), ("client", "a"), ("client", "b")]
    assert generations.tables == {"client": {}, "agent": {}}


def test_replace_skips_rows_that_are_not_generations():
    generations = Generations(
        [
            ("client", "a", -1),
            ("client", "b", "2"),
            ("client", "c", True),
            ("robot", "d", 1),
            ("agent", "e", 2),
        ]
    )
    assert generations.tables == {"client": {}, "agent": {"e": 2}}


def test_compare_changes_nothing_until_installed_and_keeps_the_pairs_it_is_told_to():
    generations = Generations([("client", "a", 2), ("agent", "b", 1), ("agent", "c", 4)])
    held = generations.tables
    fresh, changed = generations.compare(
        [("client", "a", 3), ("agent", "d", 1), ("agent", "c", "four")], kept=[("agent", "c"), ("agent", "x")]
    )
    assert generations.tables == {"client": {"a": 2}, "agent": {"b": 1, "c": 4}}  # not yet
    assert sorted(changed) == [("agent", "b"), ("agent", "d"), ("client", "a")]
    generations.install(fresh)
    assert generations.tables is held
    assert held == {"client": {"a": 3}, "agent": {"c": 4, "d": 1}}


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (("client", "a", 1), None),
        (("agent", "a", 0), None),
        (("robot", "a", "x"), None),  # names no token's generation: skipped, not an error
        (("client", "a", "one"), "the client generation of a is 'one', not a non-negative integer"),
        (("agent", "a", -1), "the agent generation of a is -1, not a non-negative integer"),
        (("agent", "a", 1.0), "the agent generation of a is 1.0, not a non-negative integer"),
        (("agent", "a", None), "the agent generation of a is NULL, not a non-negative integer"),
        (("agent", "a", b"\x01\x02"), "the agent generation of a is a blob of 2 bytes, not a non-negative"),
        (("agent", "a\nb", "1\n" * 40), "the agent generation of 'a\\nb' is '1\\n1\\n"),
    ],
)
def test_a_stored_row_s_problem_is_said_in_one_line(row, problem):
    said = generation_problem(*row)
    if problem is None:
        assert said is None
    else:
        assert said.startswith(problem) and "\n" not in said and len(said) < 200


def test_update_changes_only_the_rows_given_in_the_table_the_verifier_holds():
    """A watched store's changes one by one (a NATS bucket): the rest is kept, zeros are not."""
    generations = Generations([("client", "a", 1), ("agent", "b", 2)])
    verifier = TokenVerifier([SECRET])
    generations.attach(verifier)
    assert generations.update([("client", "c", 1), ("agent", "b", 2)]) == [("client", "c")]
    assert generations.update([("client", "a", 0), ("agent", "b", 3)]) == [("client", "a"), ("agent", "b")]
    assert generations.update([("client", "z", 0)]) == []  # absent is 0 already
    assert verifier.generations is generations.tables
    assert verifier.generations == {"client": {"c": 1}, "agent": {"b": 3}}
    skipped = [("client", "a", -1), ("client", "b", "2"), ("client", "c", True), ("robot", "d", 1)]
    assert generations.update(skipped) == []
    assert generations.tables == {"client": {"c": 1}, "agent": {"b": 3}}


def test_a_raised_client_generation_closes_the_connected_app_with_4401():
    generations = Generations()
    bridge = bridge_with(generations)
    alice, alice_link = connect(bridge, "alice")
    bob, bob_link = connect(bridge, "bob")
    register(alice, tool("a"))
    changed = generations.replace([("client", "alice", 1), ("agent", "bob", 1)])
    assert close_revoked_apps(bridge.apps, changed, NOW) == ["alice"]
    assert alice_link.close() == (4401, REVOKED_REASON)
    assert bob_link.close() is None  # bob's agent generation changed, not his app's
    assert "alice" not in bridge.apps and "bob" in bridge.apps
    # A new token of the new generation connects again.
    assert app_answer(bridge, mint(SECRET, "client", "alice", 3600, NOW, gen=1)) is None
    assert app_answer(bridge, mint(SECRET, "client", "alice", 3600, NOW, gen=0))[0] == 4401  # type: ignore[index]


def test_an_unchanged_table_closes_nothing():
    generations = Generations([("client", "alice", 1)])
    bridge = bridge_with(generations)
    _, link = connect(bridge, None, offered=mint(SECRET, "client", "alice", 3600, NOW, gen=1))
    assert close_revoked_apps(bridge.apps, generations.replace([("client", "alice", 1)]), NOW) == []
    assert link.close() is None
