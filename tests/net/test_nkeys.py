"""NATS creds files without the nkeys package (clientmcp_fast/net/nkeys.py; docs/scaling.md, Settings).

Ed25519 is held to RFC 8032's test vectors (section 7.1), NKey seeds, public keys and
signatures to the `nkeys` package (PyNaCl, libsodium) on the same secrets, and the reading
of a creds file to nats-py's own reader; every bad file is one specific error.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from pathlib import Path

import pytest
from natsserver import NKey, Operator, encode_seed

from clientmcp_fast.net import nkeys
from clientmcp_fast.net.nkeys import CredsError, CredsSigner, parse_creds, read_creds

reference = pytest.importorskip("nkeys", reason="the reference: pip install nkeys (the test extra)")

KINDS = [
    nkeys.PREFIX_USER,
    nkeys.PREFIX_ACCOUNT,
    nkeys.PREFIX_OPERATOR,
    nkeys.PREFIX_SERVER,
    nkeys.PREFIX_CLUSTER,
]

# RFC 8032, 7.1: TEST 1, TEST 2, TEST 3 and TEST SHA(abc) (secret key, public key, message, signature).
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        b"",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        bytes.fromhex("72"),
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        bytes.fromhex("af82"),
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
    (
        "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
        "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        hashlib.sha512(b"abc").digest(),
        "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032)
def test_ed25519_matches_rfc_8032(secret, public, message, signature):
    assert nkeys.ed25519_public_key(bytes.fromhex(secret)).hex() == public
    assert nkeys.ed25519_sign(bytes.fromhex(secret), message).hex() == signature


def test_crc16_is_xmodem():
    assert nkeys.crc16(b"123456789") == 0x31C3  # the catalogue's check value of CRC-16/XMODEM


@pytest.mark.parametrize("prefix", KINDS)
def test_seeds_public_keys_and_signatures_are_the_nkeys_packages(prefix):
    for _ in range(8):
        secret = os.urandom(32)
        seed = encode_seed(prefix, secret)
        assert seed == reference.encode_seed(secret, prefix).decode()
        pair = reference.from_seed(bytearray(seed.encode()))
        assert nkeys.encode_public_key(prefix, nkeys.ed25519_public_key(secret)) == pair.public_key.decode()
        assert nkeys.decode_seed(seed) == (prefix, secret)
        for message in (b"", b"nonce", os.urandom(1024)):
            signature = nkeys.ed25519_sign(secret, message)
            assert signature == pair.sign(message)
            assert pair.verify(message, signature)


def test_a_creds_file_reads_as_nats_py_reads_it_and_signs_as_nkeys_would(tmp_path):
    from nats.aio.client import Client

    path = tmp_path / "user.creds"
    path.write_text(Operator().account("bridge").creds("bridge-1"))
    creds = read_creds(str(path))
    assert creds.jwt.encode() == bytes(Client()._read_creds_user_jwt(str(path)))
    seed = Client()._read_creds_user_nkey(str(path))
    pair = reference.from_seed(seed)
    assert creds.public_key == pair.public_key.decode()
    nonce = "PXoWU7zWAMt75FY"
    assert creds.sign(nonce.encode()) == base64.b64encode(pair.sign(nonce.encode()))
    signer = CredsSigner(str(path))
    assert signer.options() == {"user_jwt_cb": signer.jwt, "signature_cb": signer.signature}
    assert signer.signature(nonce) == creds.sign(nonce.encode()) and signer.jwt() == creds.jwt.encode()


def test_the_signer_reads_the_file_again_at_each_connection_and_keeps_the_last_good(tmp_path):
    """A renewed JWT written over the file is used at the next reconnect; a spoilt file is said, not used."""
    account = Operator().account("bridge")
    path = tmp_path / "user.creds"
    path.write_text(account.creds("first"))
    errors: list[CredsError] = []
    signer = CredsSigner(str(path), on_error=errors.append)
    first = signer.jwt()
    path.write_text(account.creds("renewed"))
    signer.signature("nonce")
    renewed = signer.jwt()
    assert renewed != first and renewed == read_creds(str(path)).jwt.encode()
    path.write_text("nothing")
    signature = signer.signature("nonce")
    assert signer.jwt() == renewed and signature == signer.creds.sign(b"nonce")
    signer.signature("nonce")  # a retry: the same fault is not said again
    path.write_text(account.creds("again"))
    signer.signature("nonce")
    path.write_text("nothing")
    signer.signature("nonce")  # good in between: said again
    assert [str(error) for error in errors] == [
        "it has no -----BEGIN NATS USER JWT----- block (is it a creds file?)"
    ] * 2


# -- bad files: one specific error each ------------------------------------------------------------


def _good() -> str:
    return Operator().account("bridge").creds("bridge-1")


def _seed_of(text: str) -> str:
    lines = text.splitlines()
    return lines[lines.index("-----BEGIN USER NKEY SEED-----") + 1]


def _jwt_of(text: str) -> str:
    return text.splitlines()[1]


def _flip(seed: str, index: int) -> str:
    return seed[:index] + ("A" if seed[index] != "A" else "B") + seed[index + 1 :]


def _error(text: str, now: float | None = None) -> str:
    with pytest.raises(CredsError) as raised:
        parse_creds(text, time.time() if now is None else now)
    return str(raised.value)


def test_a_file_without_one_of_the_blocks_is_refused():
    good = _good()
    assert _error("") == "it has no -----BEGIN NATS USER JWT----- block (is it a creds file?)"
    without_seed = good.split("************************* IMPORTANT")[0]
    assert _error(without_seed) == "it has no -----BEGIN USER NKEY SEED----- block (is it a creds file?)"
    assert _error(good.replace(_jwt_of(good), "")) == "its BEGIN NATS USER JWT block is empty"
    assert _error(good.replace(_seed_of(good), "")) == "its BEGIN USER NKEY SEED block is empty"


def test_a_seed_with_a_wrong_character_fails_its_checksum():
    good = _good()
    seed = _seed_of(good)
    # Not the last character: 58 base32 characters hold 290 bits for the seed's 288, so two bits
    # of the last one are dropped when decoding, and a change to them alone is the same seed.
    for index in (5, 30, len(seed) - 2):
        assert _error(good.replace(seed, _flip(seed, index))) == (
            "the NKey seed's checksum does not match: a character is wrong or missing"
        )


def test_a_seed_that_is_not_one_is_refused():
    good = _good()
    seed = _seed_of(good)
    assert _error(good.replace(seed, "SU!!not-base32")) == "the NKey seed is not base32 text"
    assert _error(good.replace(seed, seed[:-8])) == "the NKey seed holds 31 bytes, not 36"
    user = NKey(nkeys.PREFIX_USER)
    assert _error(good.replace(seed, user.public)) == "the NKey seed holds 35 bytes, not 36"  # a public key
    not_a_seed = base64.b32encode(b"\x00" * 34 + nkeys.crc16(b"\x00" * 34).to_bytes(2, "little")).decode()
    assert _error(good.replace(seed, not_a_seed)) == "the NKey seed does not start with S: it is not a seed"


@pytest.mark.parametrize(
    ("prefix", "said"),
    [(nkeys.PREFIX_ACCOUNT, "an account's (SA...)"), (nkeys.PREFIX_OPERATOR, "an operator's (SO...)")],
)
def test_a_seed_of_another_kind_than_a_user_is_refused(prefix, said):
    good = _good()
    assert (
        _error(good.replace(_seed_of(good), NKey(prefix).seed)) == f"its seed is {said}, not a user's (SU...)"
    )


def test_a_jwt_that_is_not_the_seeds_users_is_refused():
    """Two creds files mixed up: the JWT of one user with the seed of another."""
    good, other = _good(), _good()
    public = parse_creds(good, time.time()).public_key
    theirs = parse_creds(other, time.time()).public_key
    assert _error(good.replace(_jwt_of(good), _jwt_of(other))) == (
        f"its JWT is for {theirs!r} but its seed is the key of {public!r}"
    )


def test_a_jwt_that_is_no_jwt_or_not_a_users_is_refused():
    good = _good()
    jwt = _jwt_of(good)
    assert (
        _error(good.replace(jwt, "abc.def"))
        == "the user JWT is not a JWT (three base64url parts joined by dots)"
    )
    assert _error(good.replace(jwt, "a.!!.c")) == "the user JWT's claims are not base64url JSON"
    assert _error(good.replace(jwt, "a.WzFd.c")) == "the user JWT's claims are not a JSON object"
    account = Operator().account("bridge")
    assert _error(good.replace(jwt, account.jwt)) == "its JWT is of type 'account', not a user's"


def test_an_expired_jwt_is_refused():
    creds = Operator().account("bridge").creds("bridge-1", exp=1_700_000_000)
    assert _error(creds, now=1_700_000_000) == "its user JWT expired at 2023-11-14T22:13:20Z"
    assert parse_creds(creds, now=1_699_999_999).jwt == _jwt_of(creds)


def test_files_that_cannot_be_read_as_creds_are_refused(tmp_path: Path):
    with pytest.raises(CredsError, match="^it is not a file$"):
        read_creds(str(tmp_path))
    with pytest.raises(CredsError, match=r"^cannot read it \(No such file or directory\)$"):
        read_creds(str(tmp_path / "none"))
    large = tmp_path / "large.creds"
    large.write_text(_good() + " " * nkeys.MAX_CREDS_BYTES)
    with pytest.raises(CredsError, match="^it is over 65536 bytes: a creds file is about one kilobyte$"):
        read_creds(str(large))
    binary = tmp_path / "binary.creds"
    binary.write_bytes(b"\xff\xfe" + _good().encode())
    with pytest.raises(CredsError, match="^it is not UTF-8 text$"):
        read_creds(str(binary))


def test_crlf_files_read_as_lf_files(tmp_path):
    text = _good()
    path = tmp_path / "user.creds"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    assert read_creds(str(path)) == parse_creds(text, time.time())
