"""Token verification (`core.tokens.TokenVerifier.verify`): any text, and correctly signed tokens of any content.

The first byte's low 2 bits choose what the rest is: 0 the token itself (as bytes if
bit 0x80 is set, else as text); 1 a token's claims, signed under the default header; 2
its header and claims, split at the first NUL, signed; 3 the two first segments as
written, signed. The signing secret is either of the verifier's two (bit 0x10).

A failure is `verify` raising anything but TokenError, a client ID that is not one, or
a token accepted that is not HS256 signed with a configured secret, or whose claims do
not say that client ID, that role and a validity around now; or the cached answer
differing from the first.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from fakes import NOW, SECRET

from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN, ROLES, TokenError, TokenVerifier

OTHER_SECRET = b"fuzz-second-secret-0123456789abcdefghij"
SECRETS = (SECRET, OTHER_SECRET)
HEADER = b'{"alg":"HS256","typ":"JWT"}'


def b64(data: bytes) -> bytes:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def signed(signing_input: bytes, secret: bytes) -> bytes:
    """The compact JWS of `signing_input` (two segments) signed with HS256."""
    return signing_input + b"." + b64(hmac.new(secret, signing_input, hashlib.sha256).digest())


def unpadded(segment: str) -> bytes:
    """The bytes of an unpadded base64url segment."""
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def make_token(data: bytes) -> str | bytes:
    """The token the input stands for."""
    mode, rest = (data[0], data[1:]) if data else (0, b"")
    secret = SECRETS[mode >> 4 & 1]
    kind = mode & 0x03
    if kind == 1:
        return signed(b64(HEADER) + b"." + b64(rest), secret).decode()
    if kind == 2:
        header, _, claims = rest.partition(b"\0")
        return signed(b64(header) + b"." + b64(claims), secret).decode()
    if kind == 3:
        return signed(rest, secret).decode("latin-1")
    return rest if mode & 0x80 else rest.decode("latin-1")


def outcome(verifier: TokenVerifier, token: str | bytes, role: str) -> str:
    """The client ID, or the refusal's text."""
    try:
        client_id = verifier.verify(token, role, NOW)
    except TokenError as error:
        return f"refused: {error}"
    assert type(client_id) is str and CLIENT_ID_PATTERN.fullmatch(client_id), client_id
    return client_id


def check_accepted(token: str | bytes, role: str, client_id: str) -> None:
    """What an accepted token must be, checked without the code under test."""
    text = token.decode("latin-1") if isinstance(token, bytes) else token
    head, claims, signature = text.split(".")
    signing_input = f"{head}.{claims}".encode("ascii")
    assert any(signed(signing_input, secret).decode() == text for secret in SECRETS), "not signed"
    assert json.loads(unpadded(head))["alg"] == "HS256"
    members = json.loads(unpadded(claims))
    assert members["sub"] == client_id and members["role"] == role, members
    assert members.get("exp", NOW) + 60 >= NOW >= members.get("nbf", NOW) - 60, members


def TestOneInput(data: bytes) -> None:
    token = make_token(data)
    verifier = TokenVerifier(SECRETS)
    accepted = 0
    for role in ROLES:
        first = outcome(verifier, token, role)
        assert outcome(verifier, token, role) == first, "the cached answer differs"
        if not first.startswith("refused: "):
            accepted += 1
            check_accepted(token, role, first)
    assert accepted <= 1, "one token accepted in both roles"
