"""Token checks and minting without a clock (ClientMCP v1 §2, docs/configuration.md): each rule, a golden token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import warnings

import hypothesis
import jwt
import pytest
from hypothesis import strategies as st

from clientmcp_fast.core import tokens
from clientmcp_fast.core.tokens import CLOCK_SKEW_SECONDS, TokenError, TokenVerifier, mint

SECRET = b"token-tests-secret-0123456789abcdef-0123"
OTHER_SECRET = b"another-secret-for-rotation-0123456789ab"
NOW = 1_700_000_000.0
HS256 = {"alg": "HS256", "typ": "JWT"}


def b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def hand_token(header: dict, claims, secret: bytes | None = SECRET) -> str:
    """A JWT built byte by byte, so that claims PyJWT refuses to encode can still be sent."""
    signing_input = b64url(json.dumps(header).encode()) + b"." + b64url(json.dumps(claims).encode())
    signature = b"" if secret is None else b64url(hmac.new(secret, signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + signature).decode("ascii")


def claims(**extra) -> dict:
    return {"sub": "alice-wallet", "role": "client", "exp": int(NOW) + 3600, **extra}


def verify(token: str, role: str = "client", now: float = NOW, secrets=(SECRET,)) -> str:
    return TokenVerifier(list(secrets)).verify(token, role, now)


def refused(token: str, role: str = "client", now: float = NOW, secrets=(SECRET,)) -> str:
    with pytest.raises(TokenError) as caught:
        verify(token, role, now, secrets)
    return str(caught.value)


# -- ClientMCP v1 §2: the algorithm and the signature -----------------------------------------


def test_a_valid_hs256_client_token_gives_its_client_id():
    assert verify(hand_token(HS256, claims())) == "alice-wallet"


def test_alg_none_is_refused():
    assert (
        refused(hand_token({"alg": "none", "typ": "JWT"}, claims(), secret=None))
        == "token algorithm is not HS256"
    )


def test_alg_none_with_a_valid_hs256_signature_is_still_refused():
    assert refused(hand_token({"alg": "none"}, claims())) == "token algorithm is not HS256"


def test_hs512_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns that the key is short for SHA-512
        token = jwt.encode(claims(), SECRET, algorithm="HS512")
    assert refused(token) == "token algorithm is not HS256"


def test_a_header_without_alg_is_refused():
    assert refused(hand_token({"typ": "JWT"}, claims())) == "token algorithm is not HS256"


def test_a_token_signed_with_another_secret_is_refused():
    token = jwt.encode(claims(), OTHER_SECRET, algorithm="HS256")
    assert refused(token) == "token signature does not verify"


def test_a_tampered_payload_is_refused():
    header, _, signature = hand_token(HS256, claims()).split(".")
    forged = b64url(json.dumps(claims(sub="mallory")).encode()).decode()
    assert refused(f"{header}.{forged}.{signature}") == "token signature does not verify"


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "a.b"])
def test_garbage_is_refused_as_malformed(token):
    assert refused(token) == "token is malformed"


def test_a_payload_that_is_not_an_object_is_refused():
    assert refused(hand_token(HS256, ["alice-wallet", "client"])) == "token is malformed"


# -- RFC 7515 and RFC 8259: exactly base64url and JSON, nothing a lenient parser lets by ---------


def signed(header: bytes, payload: bytes, secret: bytes = SECRET) -> str:
    """A token whose segments are `header` and `payload` as given, correctly signed over them."""
    signing_input = header + b"." + payload
    return (signing_input + b"." + b64url(hmac.new(secret, signing_input, hashlib.sha256).digest())).decode()


HEADER = b64url(json.dumps(HS256).encode())


@pytest.mark.parametrize(
    "payload",
    [
        b'{"sub":"alice-wallet","role":"client","exp":NaN}',
        b'{"sub":"alice-wallet","role":"client","exp":Infinity}',
        b'{"sub":"alice-wallet","role":"client","exp":-Infinity}',
        b'{"sub":"alice-wallet","role":"client","exp":1e400}',
        b'\xef\xbb\xbf{"sub":"alice-wallet","role":"client"}',
        b'{"sub":"alice-wallet","role":"client"',
        b'{"sub":"alice-wallet","role":"client"} x',
        b'{"sub":"alice-\xff","role":"client"}',
    ],
    ids=["NaN", "Infinity", "-Infinity", "overflow", "BOM", "truncated", "trailing", "not UTF-8"],
)
def test_a_signed_payload_that_is_not_strict_json_is_refused(payload):
    assert refused(signed(HEADER, b64url(payload))) == "token is malformed"


def test_a_signed_header_that_is_not_strict_json_is_refused():
    bom_header = b64url(b"\xef\xbb\xbf" + json.dumps(HS256).encode())
    assert refused(signed(bom_header, b64url(json.dumps(claims()).encode()))) == "token is malformed"


def test_a_valid_token_respelt_in_any_other_way_is_refused():
    token = hand_token(HS256, claims())
    header, payload, signature = token.split(".")
    # The last character of a segment whose length is not a multiple of 4 carries unused bits.
    assert len(signature) % 4
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(signature[-1])
    respelt = signature[:-1] + alphabet[last ^ 1]  # the same bytes to a lenient decoder
    assert base64.urlsafe_b64decode(respelt + "=") == base64.urlsafe_b64decode(signature + "=")
    for variant in (
        f"{header}.{payload}.{signature}=",  # a stray pad
        f"{header}.{payload}.{signature}==",
        f"{header}=.{payload}.{signature}",
        f"{header}.{payload}=.{signature}",
        f"{header}.{payload}.{respelt}",  # a non-canonical last character
        f" {token}",
        f"{token}\n",
        f"{header}.{payload}.{signature.replace('-', '+').replace('_', '/')}",
    ):
        if variant != token:
            assert refused(variant) == "token is malformed", variant
    assert verify(token) == "alice-wallet"


def test_duplicate_members_take_the_last_as_rfc_7515_allows():
    payload = b'{"sub":"mallory","role":"client","sub":"alice-wallet"}'
    assert verify(signed(HEADER, b64url(payload))) == "alice-wallet"


# -- ClientMCP v1 §2: rotation ----------------------------------------------------------------


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET, b"third-rotation-secret-0123456789abcdef"])
def test_a_token_signed_with_any_configured_secret_verifies(signer):
    secrets = (SECRET, OTHER_SECRET, b"third-rotation-secret-0123456789abcdef")
    token = jwt.encode(claims(), signer, algorithm="HS256")
    assert verify(token, secrets=secrets) == "alice-wallet"


def test_a_secret_dropped_from_the_rotation_no_longer_verifies():
    token = jwt.encode(claims(), OTHER_SECRET, algorithm="HS256")
    assert verify(token, secrets=(SECRET, OTHER_SECRET)) == "alice-wallet"
    assert refused(token, secrets=(SECRET,)) == "token signature does not verify"


def test_a_verifier_needs_a_secret():
    with pytest.raises(ValueError):
        TokenVerifier([])


# -- ClientMCP v1 §2: sub ---------------------------------------------------------------------


def test_a_missing_sub_is_refused():
    body = claims()
    del body["sub"]
    assert refused(hand_token(HS256, body)) == "token sub is missing or not a string"


@pytest.mark.parametrize("sub", [42, None, True, ["alice"], {"id": "alice"}])
def test_a_non_string_sub_is_refused(sub):
    assert refused(hand_token(HS256, claims(sub=sub))) == "token sub is missing or not a string"


@pytest.mark.parametrize(
    "sub",
    ["", "x" * 129, "alice wallet", "alice/wallet", "alice\n", "zürich", "a+b", "a#b", "\u0661"],
    ids=["empty", "129-chars", "space", "slash", "newline", "non-ascii", "plus", "hash", "arabic-digit"],
)
def test_a_sub_that_is_not_a_client_id_is_refused(sub):
    assert refused(hand_token(HS256, claims(sub=sub))) == "token sub is not a valid client ID"


@pytest.mark.parametrize("sub", ["a", "x" * 128, "Alice_wallet-1.2:prod@example.com", "0"])
def test_every_client_id_character_is_accepted(sub):
    assert verify(hand_token(HS256, claims(sub=sub))) == sub


# -- ClientMCP v1 §2: role --------------------------------------------------------------------


@pytest.mark.parametrize("role", [None, "", "admin", "Client", 1, ["client"]])
def test_a_bad_role_is_refused(role):
    assert refused(hand_token(HS256, claims(role=role))) == "token role is missing or not client/agent"


def test_a_missing_role_is_refused():
    body = claims()
    del body["role"]
    assert refused(hand_token(HS256, body)) == "token role is missing or not client/agent"


def test_a_client_token_is_refused_at_the_agent_endpoint():
    token = hand_token(HS256, claims(role="client"))
    assert refused(token, role="agent") == "token role is client, this endpoint needs agent"


def test_an_agent_token_is_refused_on_the_client_channel():
    token = hand_token(HS256, claims(role="agent"))
    assert refused(token, role="client") == "token role is agent, this endpoint needs client"
    assert verify(token, role="agent") == "alice-wallet"


# -- ClientMCP v1 §2: exp and nbf, with 60 s of skew ------------------------------------------


def test_the_skew_is_sixty_seconds():
    assert CLOCK_SKEW_SECONDS == 60.0


def test_an_expired_token_is_accepted_within_the_skew():
    assert verify(hand_token(HS256, claims(exp=int(NOW) - 60))) == "alice-wallet"


def test_a_token_expired_beyond_the_skew_is_refused():
    assert refused(hand_token(HS256, claims(exp=int(NOW) - 61))) == "token expired"


def test_nbf_in_the_future_is_accepted_within_the_skew():
    assert verify(hand_token(HS256, claims(nbf=int(NOW) + 60))) == "alice-wallet"


def test_nbf_in_the_future_beyond_the_skew_is_refused():
    assert refused(hand_token(HS256, claims(nbf=int(NOW) + 61))) == "token not valid yet (nbf)"


def test_fractional_exp_and_nbf_are_numbers_too():
    token = hand_token(HS256, claims(exp=NOW + 0.5, nbf=NOW - 0.5))
    assert verify(token) == "alice-wallet"
    assert refused(token, now=NOW + 61) == "token expired"


@pytest.mark.parametrize("name", ["exp", "nbf"])
@pytest.mark.parametrize("value", [str(int(NOW) + 3600), True, False, None, [1], {"t": 1}])
def test_exp_and_nbf_must_be_numbers(name, value):
    assert refused(hand_token(HS256, claims(**{name: value}))) == f"claim {name} is not a number"


def test_a_token_without_exp_is_accepted():
    body = claims()
    del body["exp"]
    assert verify(hand_token(HS256, body), now=NOW + 10 * 365 * 86400) == "alice-wallet"


def test_a_cached_token_is_refused_once_it_expires():
    verifier = TokenVerifier([SECRET])
    token = hand_token(HS256, claims(exp=int(NOW) + 10))
    assert verifier.verify(token, "client", NOW) == "alice-wallet"
    # The same string again: served from the cache, but exp is checked against each `now`.
    assert verifier.verify(token, "client", NOW + 70) == "alice-wallet"
    with pytest.raises(TokenError, match="^token expired$"):
        verifier.verify(token, "client", NOW + 71)


def test_a_cached_token_still_becomes_valid_only_at_nbf():
    verifier = TokenVerifier([SECRET])
    token = hand_token(HS256, claims(nbf=int(NOW) + 100))
    with pytest.raises(TokenError, match="nbf"):
        verifier.verify(token, "client", NOW)
    assert verifier.verify(token, "client", NOW + 40) == "alice-wallet"


def test_a_cached_token_is_still_refused_for_the_wrong_role():
    verifier = TokenVerifier([SECRET])
    token = hand_token(HS256, claims())
    assert verifier.verify(token, "client", NOW) == "alice-wallet"
    with pytest.raises(TokenError, match="needs agent"):
        verifier.verify(token, "agent", NOW)


def test_a_small_cache_evicts_and_still_verifies():
    verifier = TokenVerifier([SECRET], cache_size=2)
    tokens = [hand_token(HS256, claims(sub=f"app-{i}")) for i in range(5)]
    for _ in range(2):
        assert [verifier.verify(t, "client", NOW) for t in tokens] == [f"app-{i}" for i in range(5)]


def test_a_token_verified_without_remembering_is_checked_every_time_and_never_cached(monkeypatch):
    """Apps' tokens (once per connection) are not kept: no memory per idle app, no agent token evicted."""
    agent = hand_token(HS256, claims(sub="agent-1", role="agent"))
    app = hand_token(HS256, claims(sub="app-1"))
    expired = hand_token(HS256, claims(exp=int(NOW) - 100))
    decodes = []  # signatures checked
    real_hmac = tokens.hmac.new
    monkeypatch.setattr(tokens.hmac, "new", lambda *a, **k: decodes.append(1) or real_hmac(*a, **k))
    verifier = TokenVerifier([SECRET], cache_size=1)
    assert verifier.verify(agent, "agent", NOW) == "agent-1"
    for _ in range(2):
        assert verifier.verify(app, "client", NOW, remember=False) == "app-1"
    with pytest.raises(TokenError, match="^token expired$"):
        verifier.verify(expired, "client", NOW, remember=False)
    assert verifier.verify(agent, "agent", NOW) == "agent-1"  # still cached: the apps pushed nothing out
    assert len(decodes) == 4


# -- the resource an OAuth access token is for (docs/oauth.md) ----------------------------------

PREFIX = "https://bridge.example.com/apps/"


@pytest.mark.parametrize(
    "aud, prefix, resource",
    [
        (PREFIX + "app-1/mcp", PREFIX, b"app-1"),
        (PREFIX + "app-1/mcp", None, None),  # OAuth off: no token is any resource's
        (PREFIX + "app-2/mcp", PREFIX, None),  # another app's resource than its sub
        ("https://other.example.com/apps/app-1/mcp", PREFIX, None),
        ("HTTPS://bridge.example.com/apps/app-1/mcp", PREFIX, None),  # as minted, exactly
        (PREFIX + "app-1/mcp/", PREFIX, None),
        ([PREFIX + "app-1/mcp"], PREFIX, None),  # a list: no resource here takes one
        (None, PREFIX, None),
    ],
)
def test_a_grant_names_its_apps_resource_only_when_aud_is_exactly_that(aud, prefix, resource):
    verifier = TokenVerifier([SECRET])
    verifier.resource_prefix = prefix
    extra = {} if aud is None else {"aud": aud}
    token = jwt.encode({"sub": "app-1", "role": "agent", **extra}, SECRET, algorithm="HS256")
    assert verifier.grant(token, "agent", NOW).resource == resource


# -- ClientMCP v1 §2: other claims are ignored ------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"aud": "https://bridge.example.com"},
        {"aud": ["a", "b"]},
        {"aud": 5},
        {"iat": int(NOW) + 86400},
        {"iat": "yesterday"},
        {"jti": 12345},
        {"iss": "backend"},
        {"iss": 7},
        {"gen": 3},
        {"gen": "not-a-number"},
        {"favourite_colour": "blue", "nested": {"a": [1, 2]}},
    ],
    ids=[
        "aud",
        "aud-list",
        "aud-number",
        "future-iat",
        "string-iat",
        "numeric-jti",
        "iss",
        "numeric-iss",
        "gen",
        "odd-gen",
        "unknown",
    ],
)
def test_other_claims_are_ignored(extra):
    assert verify(hand_token(HS256, claims(**extra))) == "alice-wallet"


def test_extra_header_members_are_ignored():
    assert verify(hand_token({"alg": "HS256", "typ": "JWT", "kid": "2024"}, claims())) == "alice-wallet"


# -- ClientMCP v1 §2 and docs/configuration.md: minting, and the golden token -----------------

GOLDEN_SECRET = b"golden-secret-for-tests-0123456789abcdef"
GOLDEN_NOW = 1_700_000_000.0
GOLDEN_TOKEN = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJhbGljZS13YWxsZXQiLCJyb2xlIjoiY2xpZW50IiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDM2MDB9"
    ".dmqWZGf9ZZQhYSZEnt0MIjyFCvno3RHtkIkLs9fESB8"
)


def test_mint_produces_the_golden_token_byte_for_byte():
    assert mint(GOLDEN_SECRET, "client", "alice-wallet", 3600, GOLDEN_NOW) == GOLDEN_TOKEN


def test_the_golden_token_is_hs256_over_its_own_bytes():
    signing_input, _, signature = GOLDEN_TOKEN.rpartition(".")
    expected = b64url(hmac.new(GOLDEN_SECRET, signing_input.encode(), hashlib.sha256).digest()).decode()
    assert signature == expected
    header, payload = (json.loads(base64.urlsafe_b64decode(part + "==")) for part in signing_input.split("."))
    assert header == {"alg": "HS256", "typ": "JWT"}
    assert payload == {"sub": "alice-wallet", "role": "client", "iat": 1_700_000_000, "exp": 1_700_003_600}


def test_the_golden_token_verifies_until_exp_plus_skew():
    verifier = TokenVerifier([GOLDEN_SECRET])
    assert verifier.verify(GOLDEN_TOKEN, "client", GOLDEN_NOW) == "alice-wallet"
    assert verifier.verify(GOLDEN_TOKEN, "client", GOLDEN_NOW + 3660) == "alice-wallet"
    with pytest.raises(TokenError, match="^token expired$"):
        TokenVerifier([GOLDEN_SECRET]).verify(GOLDEN_TOKEN, "client", GOLDEN_NOW + 3661)


def test_a_minted_agent_token_verifies_for_agents_only():
    token = mint(SECRET, "agent", "alice-wallet", 60, NOW)
    assert verify(token, role="agent") == "alice-wallet"
    assert refused(token, role="client") == "token role is agent, this endpoint needs client"


@pytest.mark.parametrize("role", ["admin", "", "Client"])
def test_mint_refuses_an_unknown_role(role):
    with pytest.raises(ValueError):
        mint(SECRET, role, "alice-wallet", 60, NOW)


@pytest.mark.parametrize("client_id", ["", "x" * 129, "a b", "é"])
def test_mint_refuses_an_invalid_client_id(client_id):
    with pytest.raises(ValueError):
        mint(SECRET, "client", client_id, 60, NOW)


def test_token_errors_never_contain_the_token():
    token = hand_token(HS256, claims(sub="not valid!"))
    assert token not in refused(token)


# -- the standard library's HMAC against PyJWT's -----------------------------------------------


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(
    secret=st.sampled_from([SECRET, OTHER_SECRET]),
    # Not `iss`: PyJWT refuses to mint one that is not a string (a TypeError, before any
    # signature), and Hypothesis draws keys from the loaded modules' string constants.
    extra=st.dictionaries(
        st.text(max_size=8).filter(lambda key: key != "iss"), st.text(max_size=8) | st.integers(), max_size=3
    ),
    tamper=st.none() | st.integers(min_value=0),
)
def test_the_verifier_accepts_exactly_the_signatures_pyjwt_accepts(secret, extra, tamper):
    """The bridge checks HMAC-SHA256 itself; PyJWT, which mints, is the reference it must agree with."""
    token = jwt.encode({**extra, **claims()}, secret, algorithm="HS256")
    if tamper is not None:
        index = tamper % len(token)
        if token[index] != ".":
            token = token[:index] + ("A" if token[index] != "A" else "B") + token[index + 1 :]
    # Only the signature and the claims ClientMCP v1 §2 reads are compared: jti and aud are
    # other claims, ignored by the bridge, which PyJWT checks (Hypothesis draws them from the
    # string constants of the modules loaded, such as core/oauth.py's).
    options = {"verify_exp": False, "verify_iat": False, "verify_jti": False, "verify_aud": False}
    try:
        jwt.decode(token, SECRET, algorithms=["HS256"], options=options)
        expected = "alice-wallet"
    except jwt.PyJWTError:
        expected = None
    try:
        got = verify(token)
    except TokenError:
        got = None
    assert got == expected


@hypothesis.settings(max_examples=200, deadline=None, derandomize=True)
@hypothesis.given(
    client_id=st.from_regex(tokens.CLIENT_ID_PATTERN, fullmatch=True),
    role=st.sampled_from(tokens.ROLES),
    ttl=st.floats(min_value=1, max_value=10 * 365 * 86400),
    now=st.floats(min_value=0, max_value=4e9),
)
def test_mint_writes_the_bytes_pyjwt_writes(client_id, role, ttl, now):
    claims = {"sub": client_id, "role": role, "iat": int(now), "exp": int(now + ttl)}
    assert mint(SECRET, role, client_id, ttl, now) == jwt.encode(claims, SECRET, algorithm="HS256")
