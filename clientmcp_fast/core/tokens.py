"""Stateless credentials: HS256 JWTs naming a client ID and a role (ClientMCP v1 §2, docs/configuration.md).

The clock is not read here: `now` is passed in, so every rule is tested without waiting.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
from collections.abc import Sequence

import msgspec

from clientmcp_fast.core import memo

ROLE_CLIENT = "client"
ROLE_AGENT = "agent"
ROLES = (ROLE_CLIENT, ROLE_AGENT)

MIN_SECRET_BYTES = 32
CLOCK_SKEW_SECONDS = 60.0

CLIENT_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
# A grant's gen when the claim is not a non-negative integer: no generation is ever negative,
# so such a token is refused wherever generations are kept, and ignored where they are not.
GEN_INVALID = -1
# The `tools` claim of a scoped agent token (docs/protocol.md, Scoped agent tokens): 1-1,000 entries, each a tool
# name (register's rule) or a prefix of one followed by `*`; anything else refuses the token.
MAX_SCOPE_ENTRIES = 1_000
_SCOPE_ENTRY = re.compile(r"[A-Za-z0-9_.-]{1,128}|[A-Za-z0-9_.-]{0,128}\*")


# A compact JWS is three base64url segments, unpadded (RFC 7515 §2, §7.1), and nothing else:
# no "=" pad, no whitespace, no other alphabet. The signature is empty for alg "none", which
# is then refused for its algorithm.
_COMPACT = re.compile(r"([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]*)")
# The header is judged by its alg alone, the claims by sub, role, exp and nbf (ClientMCP v1 §2:
# "Other claims are ignored"; aud, iat, iss and jti included). Signing and verifying are
# HMAC-SHA256 over the first two segments (RFC 7515 §5), with the standard library: a JWT
# library would load its key fetcher (urllib, http.client, email) and `cryptography` where
# installed, for algorithms the bridge refuses. Tests hold both to PyJWT, byte for byte.
_decode_json = msgspec.json.Decoder().decode
_encode_json = msgspec.json.Encoder().encode


class TokenError(Exception):
    """A credential was refused; the message says why and never contains the token."""


class ToolScope:
    """The tools a scoped agent token may see and call: exact names, and prefixes (`read_*`)."""

    __slots__ = ("names", "prefixes", "key")

    def __init__(self, entries: Sequence[str]) -> None:
        self.names = frozenset(entry for entry in entries if not entry.endswith("*"))
        self.prefixes = tuple(sorted({entry[:-1] for entry in entries if entry.endswith("*")}))
        # Equal scopes have equal keys (a frozenset caches its hash): what a tool set's scoped
        # views are kept under (core/register.py, `scoped_tools_json`).
        self.key = frozenset(entries)

    def allows(self, name: str) -> bool:
        """Whether the tool `name` is within the scope."""
        return name in self.names or name.startswith(self.prefixes)


class Grant:
    """What a token whose signature verified says, and what its agent has used of its limits.

    One grant per verified token: the compact form has one spelling, so a token's bytes and its
    signature name the same grant, and the per-token limits are counted here, in the
    verifier's bounded cache (docs/configuration.md, Agent limits).
    """

    __slots__ = (
        "client_id",
        "role",
        "exp",
        "nbf",
        "gen",
        "scope",
        "resource",
        "allowance",
        "allowance_at",
        "in_flight",
    )

    def __init__(
        self,
        client_id: str,
        role: str,
        exp: float,
        nbf: float,
        gen: int = 0,
        scope: ToolScope | None = None,
        resource: bytes | None = None,
    ) -> None:
        self.client_id = client_id
        self.role = role
        self.exp = exp  # math.inf without an exp claim
        self.nbf = nbf  # -math.inf without an nbf claim
        self.gen = gen  # 0 without a gen claim, GEN_INVALID when it is not a non-negative integer
        self.scope = scope  # None without a tools claim: every tool, as ClientMCP v1 has it
        # The client ID, when aud names this client's own resource on the bridge (an OAuth access
        # token, docs/oauth.md): one comparison of bytes tells a request to /apps/<id>/mcp it may go on.
        self.resource = resource
        # The token bucket of --agent-rate: requests left at `allowance_at`; never used yet, full.
        self.allowance = 0.0
        self.allowance_at = -math.inf
        self.in_flight = 0  # calls of this token sent to an app and not ended (core/bridge.py)


def _segment(text: str) -> bytes:
    """A segment's bytes, if `text` is their one canonical base64url spelling; raises TokenError.

    Base64 decoders ignore the unused low bits of the last character, so several spellings
    decode alike: only the one the encoder writes is accepted.
    """
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("token is malformed") from None
    if base64.urlsafe_b64encode(data).rstrip(b"=") != text.encode("ascii"):
        raise TokenError("token is malformed")
    return data


def _json_object(text: str) -> dict:
    """A segment's JSON object, read as RFC 8259 JSON: no NaN or Infinity, no BOM; raises TokenError."""
    try:
        value = _decode_json(_segment(text))
    except msgspec.DecodeError:
        raise TokenError("token is malformed") from None
    if not isinstance(value, dict):
        raise TokenError("token is malformed")
    return value


def _time_claim(claims: dict, name: str, absent: float) -> float:
    value = claims.get(name)
    if value is None and name not in claims:
        return absent
    # bool is an int subclass in Python, but `true` is not a NumericDate.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenError(f"claim {name} is not a number")
    return float(value)


def _gen_claim(claims: dict) -> int:
    """The generation a token names (ClientMCP v1 §2): absent is 0; GEN_INVALID unless a non-negative integer."""
    value = claims.get("gen", 0)
    # type() rather than isinstance(): true is an int in Python, and not a generation; 1.0 is a float.
    if type(value) is not int or value < 0:
        return GEN_INVALID
    return value


class TokenVerifier:
    """Verifies tokens against every configured secret, caching signatures already checked."""

    __slots__ = ("_secrets", "_cache", "_cache_size", "wall_offset", "generations", "resource_prefix")

    def __init__(self, secrets: Sequence[bytes], *, cache_size: int = 10_000) -> None:
        if not secrets:
            raise ValueError("at least one secret is needed")
        self._secrets = tuple(secrets)
        self._cache: dict[str | bytes, Grant] = {}
        self._cache_size = cache_size
        # exp and nbf are Unix times, while the server's `now` is its loop's monotonic clock:
        # the server sets the difference here, so that `now + wall_offset` is Unix time.
        self.wall_offset = 0.0
        # With a state store, the current token generations by role, then client ID (the
        # `tables` of core/generations.py's `Generations`, absent meaning 0): a token's gen must
        # equal its client ID's in its role. None: gen is ignored.
        self.generations: dict[str, dict[str, int]] | None = None
        # With OAuth on, where the apps' resources are, `<issuer>/apps/`: an agent token whose aud
        # is `<resource_prefix><sub>/mcp` is for its app's resource (Grant.resource). None: no aud is.
        self.resource_prefix: str | None = None

    def verify(self, token: str | bytes, role: str, now: float, *, remember: bool = True) -> str:
        """The client ID of a valid `role` token at time `now`; raises `TokenError` otherwise.

        `remember=False` for a token that comes once (an app's, per connection): it is checked
        but not cached, so that it costs no memory while the app sits idle, and pushes no
        agent's token out of the cache.
        """
        return self.grant(token, role, now, remember).client_id

    def grant(self, token: str | bytes, role: str, now: float, remember: bool = True) -> Grant:
        """The grant of a valid `role` token at time `now` (see `verify`); raises `TokenError` otherwise."""
        now += self.wall_offset
        grant = self._cache.get(token)
        if grant is None:
            grant = self._check_signature_and_claims(token)
            if remember:
                memo.remember(self._cache, token, grant, self._cache_size)
        if grant.role != role:
            raise TokenError(f"token role is {grant.role}, this endpoint needs {role}")
        skew = CLOCK_SKEW_SECONDS  # a local, so that compiled the comparisons are of C numbers
        if now > grant.exp + skew:
            raise TokenError("token expired")
        if now < grant.nbf - skew:
            raise TokenError("token not valid yet (nbf)")
        tables = self.generations
        if tables is not None:
            # Checked on every call, cached grant or not, so that a revocation counts at once:
            # the generation read from the token is kept in the grant, and the current one is
            # two lookups in memory (typed dicts, compiled).
            table = tables[role]
            current = table.get(grant.client_id, 0)
            if grant.gen != current:
                raise TokenError(_gen_problem(grant.gen, current))
        return grant

    def _check_signature_and_claims(self, token: str | bytes) -> Grant:
        claims = verified_claims(self._secrets, token)
        sub = claims.get("sub")
        if not isinstance(sub, str):
            raise TokenError("token sub is missing or not a string")
        if not CLIENT_ID_PATTERN.fullmatch(sub):
            raise TokenError("token sub is not a valid client ID")
        role = claims.get("role")
        if role not in ROLES:
            raise TokenError("token role is missing or not client/agent")
        return Grant(
            sub,
            role,
            _time_claim(claims, "exp", math.inf),
            _time_claim(claims, "nbf", -math.inf),
            _gen_claim(claims),
            _tools_claim(claims) if role == ROLE_AGENT else None,
            _resource_claim(claims, sub, self.resource_prefix),
        )


def verified_claims(secrets: Sequence[bytes], token: str | bytes) -> dict:
    """The claims of a compact HS256 JWS that one of `secrets` signed; raises TokenError otherwise.

    What the claims mean is the caller's to check: a role, a client ID, times (here for agents
    and apps; core/oauth.py for the credentials of OAuth).
    """
    text = token if isinstance(token, str) else token.decode("latin-1")
    parts = _COMPACT.fullmatch(text)
    if parts is None:
        raise TokenError("token is malformed")
    header = _json_object(parts[1])
    signature = _segment(parts[3])
    if header.get("alg") != "HS256":
        raise TokenError("token algorithm is not HS256")
    signed = text[: parts.end(2)].encode("ascii")
    for secret in secrets:
        if hmac.compare_digest(hmac.new(secret, signed, hashlib.sha256).digest(), signature):
            break
    else:
        raise TokenError("token signature does not verify")
    return _json_object(parts[2])


def _tools_claim(claims: dict) -> ToolScope | None:
    """The scope a `tools` claim names: None when absent; raises TokenError when malformed.

    A malformed claim is never read as "every tool": the token is refused (docs/protocol.md,
    Scoped agent tokens).
    """
    entries = claims.get("tools")
    if entries is None and "tools" not in claims:
        return None
    return scope_of(entries)


def scope_of(entries: object) -> ToolScope:
    """The scope of a `tools` claim's value; raises TokenError unless it is 1-1,000 tool names or prefixes*."""
    if type(entries) is not list or not 1 <= len(entries) <= MAX_SCOPE_ENTRIES:
        raise TokenError(f"token tools claim is not an array of 1-{MAX_SCOPE_ENTRIES} tool names")
    for entry in entries:
        if type(entry) is not str or _SCOPE_ENTRY.fullmatch(entry) is None:
            raise TokenError("token tools claim holds an entry that is not a tool name or a prefix*")
    return ToolScope(entries)


def _resource_claim(claims: dict, sub: str, prefix: str | None) -> bytes | None:
    """`sub` when the `aud` claim is exactly the URL of `sub`'s resource under `prefix`; else None."""
    if prefix is None or claims.get("aud") != f"{prefix}{sub}/mcp":
        return None
    return sub.encode("ascii")  # a client ID is ASCII (CLIENT_ID_PATTERN)


def _gen_problem(gen: int, current: int) -> str:
    if gen == GEN_INVALID:
        return "token gen is not a non-negative integer"
    if gen < current:
        return f"token revoked: gen {gen}, the current generation is {current}"
    return f"token gen {gen} is ahead of the current generation {current}"


def mint(
    secret: bytes,
    role: str,
    client_id: str,
    ttl: float,
    now: float,
    gen: int | None = None,
    tools: Sequence[str] | None = None,
) -> str:
    """A signed token for `client_id` in `role`, valid for `ttl` seconds from `now`.

    With a gen claim unless `gen` is None, and for an agent a `tools` scope unless `tools` is None.
    """
    if role not in ROLES:
        raise ValueError(f"role must be client or agent, not {role!r}")
    if not CLIENT_ID_PATTERN.fullmatch(client_id):
        raise ValueError("a client ID is 1-128 characters of A-Z a-z 0-9 _ - . : @")
    claims: dict[str, object] = {"sub": client_id, "role": role, "iat": int(now), "exp": int(now + ttl)}
    if gen is not None:
        claims["gen"] = gen
    if tools is not None:
        if role != ROLE_AGENT:
            raise ValueError("only an agent token is scoped to tools")
        tools = list(tools)
        try:
            scope_of(tools)
        except TokenError:
            raise ValueError(
                f"tools must be 1-{MAX_SCOPE_ENTRIES} tool names or prefixes ending in *, such as read_*"
            ) from None
        claims["tools"] = tools
    return sign_claims(secret, claims)


def sign_claims(secret: bytes, claims: dict) -> str:
    """`claims` as a compact HS256 JWS signed with `secret` (RFC 7515): every credential the bridge issues."""
    signed = _HS256_HEADER + b"." + _base64url(_encode_json(claims))
    return (signed + b"." + _base64url(hmac.new(secret, signed, hashlib.sha256).digest())).decode("ascii")


def _base64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


# The header PyJWT writes, in its bytes: keys sorted, no spaces.
_HS256_HEADER = _base64url(b'{"alg":"HS256","typ":"JWT"}')
