"""NATS creds files signed with the standard library only: NKey seeds and Ed25519 (RFC 8032).

`CLIENTMCP_NATS_CREDS` (docs/scaling.md, Settings) names a creds file: a user JWT and the
user's NKey seed. To connect, the bridge sends the JWT and signs the server's nonce with the
seed. nats-py does that only through the `nkeys` package, which needs PyNaCl and libsodium:
neither the container image (it must stay under its size budget) nor `dist/clientmcp`
carries them. This module reads the file, checks it (one clear line per fault, at start) and
signs, and `CredsSigner` hands nats-py its `user_jwt_cb` and `signature_cb`, so nkeys is
never imported.

Ed25519 here is plain Python integer arithmetic, which is not constant-time: how long a
signature takes depends on the secret key. That is acceptable here, and why: it signs one
nonce per connection to NATS (at start and at each reconnect), not data an attacker may
submit at will, so there is nothing to time at scale; and the only peer that sees these
signatures is the NATS server, which already carries all the cluster's traffic. Python's
standard library has no Ed25519; OpenSSL's libcrypto, in the image for TLS, has one, but
neither ssl nor hashlib exposes it, and ctypes would tie the bridge to that library's file
name and interface in each build.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import time
from typing import Any

# -- NKeys: base32 text of a prefix byte, the key and a CRC-16 ------------------------------------

# The prefix bytes of the nkeys package (and of nats-io/nkeys in Go): the first base32 letter.
PREFIX_SEED = 18 << 3  # S
PREFIX_OPERATOR = 14 << 3  # O
PREFIX_SERVER = 13 << 3  # N
PREFIX_CLUSTER = 2 << 3  # C
PREFIX_ACCOUNT = 0  # A
PREFIX_USER = 20 << 3  # U
_KINDS = {
    PREFIX_OPERATOR: "an operator",
    PREFIX_SERVER: "a server",
    PREFIX_CLUSTER: "a cluster",
    PREFIX_ACCOUNT: "an account",
    PREFIX_USER: "a user",
}
_LETTER = {
    PREFIX_OPERATOR: "O",
    PREFIX_SERVER: "N",
    PREFIX_CLUSTER: "C",
    PREFIX_ACCOUNT: "A",
    PREFIX_USER: "U",
}
SEED_BYTES = 2 + 32 + 2  # the two prefix bytes, the Ed25519 secret, the CRC-16
MAX_CREDS_BYTES = 65536  # a creds file is about 1 KB; a larger one is not a creds file


class CredsError(ValueError):
    """A creds file or NKey that cannot be used; the text says which part and why."""


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum NKeys end with."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


def _checked(body: bytes) -> str:
    return base64.b32encode(body + crc16(body).to_bytes(2, "little")).decode().rstrip("=")


def encode_public_key(prefix: int, public: bytes) -> str:
    """The NKey public key text (O..., A..., U...) of a 32-byte Ed25519 public key."""
    if prefix not in _KINDS or len(public) != 32:
        raise CredsError(
            "an NKey public key holds 32 bytes for an operator, server, cluster, account or user"
        )
    return _checked(bytes((prefix,)) + public)


def decode_seed(text: str | bytes) -> tuple[int, bytes]:
    """The prefix byte and the 32-byte secret of an NKey seed; CredsError for any fault."""
    raw_text = text.encode() if isinstance(text, str) else bytes(text)
    raw_text = raw_text.strip()
    try:
        raw = base64.b32decode(raw_text + b"=" * (-len(raw_text) % 8))
    except (binascii.Error, ValueError):
        raise CredsError("the NKey seed is not base32 text") from None
    if len(raw) != SEED_BYTES:
        raise CredsError(f"the NKey seed holds {len(raw)} bytes, not {SEED_BYTES}")
    if raw[0] & 0xF8 != PREFIX_SEED:
        raise CredsError("the NKey seed does not start with S: it is not a seed")
    # Unlike the nkeys package, which skips it: a mistyped or cut seed must not sign as another key.
    if crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        raise CredsError("the NKey seed's checksum does not match: a character is wrong or missing")
    prefix = (raw[0] & 7) << 5 | (raw[1] & 0xF8) >> 3
    if prefix not in _KINDS:
        raise CredsError("the NKey seed is of no known kind (operator, server, cluster, account, user)")
    return prefix, raw[2:34]


# -- Ed25519 (RFC 8032, section 5.1), on Python integers; not constant-time (module docstring) ----

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493  # the order of the base point
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_Point = tuple[int, int, int, int]  # extended homogeneous coordinates (X, Y, Z, T)


def _add(p: _Point, q: _Point) -> _Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _multiply(scalar: int, point: _Point) -> _Point:
    result: _Point = (0, 1, 1, 0)
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def _base() -> _Point:
    y = 4 * pow(5, _P - 2, _P) % _P
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if x & 1:
        x = _P - x
    return x, y, 1, x * y % _P


_B = _base()


def _encode_point(point: _Point) -> bytes:
    z = pow(point[2], _P - 2, _P)
    x, y = point[0] * z % _P, point[1] * z % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _expand(secret: bytes) -> tuple[int, bytes]:
    digest = hashlib.sha512(secret).digest()
    scalar = int.from_bytes(digest[:32], "little")
    return (scalar & ((1 << 254) - 8)) | 1 << 254, digest[32:]


def ed25519_public_key(secret: bytes) -> bytes:
    """The 32-byte public key of a 32-byte Ed25519 secret key."""
    scalar, _ = _expand(secret)
    return _encode_point(_multiply(scalar, _B))


def ed25519_sign(secret: bytes, message: bytes) -> bytes:
    """The 64-byte Ed25519 signature of `message` with a 32-byte secret key (RFC 8032, 5.1.6)."""
    if len(secret) != 32:
        raise CredsError("an Ed25519 secret key holds 32 bytes")
    scalar, prefix = _expand(secret)
    public = _encode_point(_multiply(scalar, _B))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _L
    encoded_r = _encode_point(_multiply(r, _B))
    k = int.from_bytes(hashlib.sha512(encoded_r + public + message).digest(), "little") % _L
    return encoded_r + ((r + k * scalar) % _L).to_bytes(32, "little")


# -- creds files ------------------------------------------------------------------------------------

JWT_BLOCK = "BEGIN NATS USER JWT"
SEED_BLOCK = "BEGIN USER NKEY SEED"


@dataclasses.dataclass(frozen=True, repr=False)
class Creds:
    """A checked creds file: the user JWT to send and the seed's secret to sign with."""

    jwt: str
    secret: bytes
    public_key: str  # the user's NKey (U...), the JWT's subject

    def sign(self, nonce: bytes) -> bytes:
        """The server's nonce signed as nats-py sends it: Ed25519, in standard base64."""
        return base64.b64encode(ed25519_sign(self.secret, nonce))


def _block(lines: list[str], marker: str) -> str | None:
    """The first non-blank line after the line holding `marker` (as nats-py reads creds files)."""
    for index, line in enumerate(lines):
        if marker in line:
            for value in lines[index + 1 :]:
                if value.strip():
                    return None if value.lstrip().startswith("---") else value.strip()
            return None
    return None


def _claims(jwt: str) -> dict[str, Any]:
    parts = jwt.split(".")
    if len(parts) != 3:
        raise CredsError("the user JWT is not a JWT (three base64url parts joined by dots)")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        raise CredsError("the user JWT's claims are not base64url JSON") from None
    if not isinstance(claims, dict):
        raise CredsError("the user JWT's claims are not a JSON object")
    return claims


def parse_creds(text: str, now: float) -> Creds:
    """The JWT and seed of a creds file's text, checked against each other; CredsError for any fault."""
    lines = text.splitlines()
    if not any(JWT_BLOCK in line for line in lines):
        raise CredsError(f"it has no -----{JWT_BLOCK}----- block (is it a creds file?)")
    if not any(SEED_BLOCK in line for line in lines):
        raise CredsError(f"it has no -----{SEED_BLOCK}----- block (is it a creds file?)")
    jwt = _block(lines, JWT_BLOCK)
    if jwt is None:
        raise CredsError(f"its {JWT_BLOCK} block is empty")
    seed = _block(lines, SEED_BLOCK)
    if seed is None:
        raise CredsError(f"its {SEED_BLOCK} block is empty")
    prefix, secret = decode_seed(seed)
    if prefix != PREFIX_USER:
        raise CredsError(f"its seed is {_KINDS[prefix]}'s (S{_LETTER[prefix]}...), not a user's (SU...)")
    public_key = encode_public_key(PREFIX_USER, ed25519_public_key(secret))
    claims = _claims(jwt)
    nats = claims.get("nats")
    kind = nats.get("type") if isinstance(nats, dict) else None
    if kind is not None and kind != "user":
        raise CredsError(f"its JWT is of type {kind!r}, not a user's")
    if claims.get("sub") != public_key:
        raise CredsError(f"its JWT is for {claims.get('sub')!r} but its seed is the key of {public_key!r}")
    expires = claims.get("exp")
    if isinstance(expires, int | float) and expires <= now:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        raise CredsError(f"its user JWT expired at {stamp}")
    return Creds(jwt=jwt, secret=secret, public_key=public_key)


def read_creds(path: str) -> Creds:
    """The checked creds file at `path`; CredsError saying what is wrong with it."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_CREDS_BYTES + 1)
    except IsADirectoryError:
        raise CredsError("it is not a file") from None
    except OSError as error:
        raise CredsError(f"cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_CREDS_BYTES:
        raise CredsError(f"it is over {MAX_CREDS_BYTES} bytes: a creds file is about one kilobyte")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CredsError("it is not UTF-8 text") from None
    return parse_creds(text, time.time())


class CredsSigner:
    """nats-py's `user_jwt_cb` and `signature_cb` for a creds file, instead of nkeys.

    The file is read again at each connection, as nats-py does with `user_credentials`, so a
    renewed JWT written over it is used from the next reconnect on; a file that has become
    unusable keeps the last good one, and the caller's `on_error` hears why, once per fault
    (a refused connection is retried twice a second).
    """

    def __init__(self, path: str, on_error: Any = None) -> None:
        self.path = path
        self.creds = read_creds(path)
        self.on_error = on_error
        self._fault: str | None = None  # the last fault said to on_error, until the file is good again

    def signature(self, nonce: str) -> bytes:
        """nats-py's signature_cb: the nonce signed; called first at each connection."""
        try:
            self.creds = read_creds(self.path)
            self._fault = None
        except CredsError as error:
            if str(error) != self._fault and self.on_error is not None:
                self.on_error(error)
            self._fault = str(error)
        return self.creds.sign(nonce.encode())

    def jwt(self) -> bytes:
        """nats-py's user_jwt_cb: the user JWT read with the signing seed."""
        return self.creds.jwt.encode()

    def options(self) -> dict[str, Any]:
        """The keyword arguments of `nats.connect` that authenticate with this file."""
        return {"user_jwt_cb": self.jwt, "signature_cb": self.signature}
