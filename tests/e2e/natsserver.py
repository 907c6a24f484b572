"""A real nats-server on loopback for the tests of a cluster of bridges (docs/scaling.md)."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from clientmcp_fast.net import nkeys

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NatsServer:
    """A nats-server on 127.0.0.1, started and stopped by the tests (it may be stopped and started again).

    With JetStream (`-js`) unless told otherwise, for `--state nats`
    (docs/configuration.md, Revocation); its store directory outlives a stop and a start, as a
    server's disk does.
    """

    def __init__(self, jetstream: bool = True, config: str | None = None, monitor: bool = False) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.jetstream = jetstream
        # nats-server's monitoring endpoint (-m), for the tests that count its clients (`clients`)
        self.monitor_port = free_port() if monitor else None
        self._store = tempfile.TemporaryDirectory(prefix="nats-js-")
        self.config = config  # a configuration file's text (-c), for what has no flag (operator mode)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        jetstream = ["-js", "-sd", self._store.name] if self.jetstream else []
        config: list[str] = []
        if self.config is not None:
            path = Path(self._store.name) / "nats.conf"
            path.write_text(self.config)
            config = ["-c", str(path)]
        monitor = ["-m", str(self.monitor_port)] if self.monitor_port is not None else []
        self.process = subprocess.Popen(
            [NATS_SERVER, *config, "-a", "127.0.0.1", "-p", str(self.port), *jetstream, *monitor],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            if time.monotonic() > give_up or self.process.poll() is not None:
                raise RuntimeError("nats-server did not start")
            time.sleep(0.02)

    def clients(self) -> list[str]:
        """The name of each client connected now, as nats-server's /connz lists them (needs `monitor`)."""
        assert self.monitor_port is not None, "NatsServer(monitor=True) has the monitoring endpoint"
        url = f"http://127.0.0.1:{self.monitor_port}/connz"
        with urllib.request.urlopen(url, timeout=5) as response:
            return [connection.get("name", "") for connection in json.load(response)["connections"] or []]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self.process = None


# -- operator mode: NATS's decentralised JWT authentication --------------------------------------


def encode_seed(prefix: int, secret: bytes) -> str:
    """The NKey seed text (S + kind letter, as `nsc` writes it) of a 32-byte Ed25519 secret."""
    body = bytes((nkeys.PREFIX_SEED | prefix >> 5, (prefix & 31) << 3)) + secret
    return base64.b32encode(body + nkeys.crc16(body).to_bytes(2, "little")).decode().rstrip("=")


class NKey:
    """A fresh NKey of one kind (nkeys.PREFIX_*): its seed and its public key text."""

    def __init__(self, prefix: int) -> None:
        self.prefix = prefix
        self.secret = secrets.token_bytes(32)
        self.seed = encode_seed(prefix, self.secret)
        self.public = nkeys.encode_public_key(prefix, nkeys.ed25519_public_key(self.secret))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def issue(issuer: NKey, subject: str, name: str, nats: dict, **claims: object) -> str:
    """A NATS JWT (v2, ed25519-nkey) for `subject`, signed by `issuer`, as `nsc` writes them."""
    body = {"jti": secrets.token_hex(16), "iat": int(time.time()), "iss": issuer.public, "sub": subject,
            "name": name, "nats": {**nats, "version": 2}, **claims}  # fmt: skip
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    signed = f"{head}.{_b64(json.dumps(body).encode())}"
    return f"{signed}.{_b64(nkeys.ed25519_sign(issuer.secret, signed.encode()))}"


NO_LIMITS = {"subs": -1, "data": -1, "payload": -1}


class Account:
    """An account signed by its operator; `creds` makes creds files of users it signs."""

    def __init__(self, operator: NKey, name: str, jetstream: bool = False) -> None:
        self.key = NKey(nkeys.PREFIX_ACCOUNT)
        limits = {**NO_LIMITS, "imports": -1, "exports": -1, "wildcards": True, "conn": -1, "leaf": -1}
        if jetstream:  # without these an account of an operator-mode server has no JetStream
            limits.update({"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1})
        self.jwt = issue(operator, self.key.public, name, {"type": "account", "limits": limits})

    def creds(self, name: str, **claims: object) -> str:
        """A creds file's text for a new user of this account (as `nsc generate creds` writes it)."""
        user = NKey(nkeys.PREFIX_USER)
        jwt = issue(
            self.key, user.public, name, {"type": "user", "pub": {}, "sub": {}, **NO_LIMITS}, **claims
        )
        return (
            f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{user.seed}\n------END USER NKEY SEED------\n\n"
            "*************************************************************\n"
        )


class Operator:
    """An operator and its accounts; `config` is a nats-server configuration trusting them."""

    def __init__(self) -> None:
        self.key = NKey(nkeys.PREFIX_OPERATOR)
        self.jwt = issue(self.key, self.key.public, "clientmcp-tests", {"type": "operator"})
        self.accounts: list[Account] = []
        self.system = self.account("SYS")  # JetStream (`-js`) needs a system account in operator mode

    def account(self, name: str, jetstream: bool = False) -> Account:
        account = Account(self.key, name, jetstream)
        self.accounts.append(account)
        return account

    def config(self) -> str:
        """Operator mode with the accounts preloaded in the server's memory resolver."""
        preload = "\n".join(f"  {a.key.public}: {a.jwt}" for a in self.accounts)
        return (
            f"operator: {self.jwt}\nsystem_account: {self.system.key.public}\n"
            f"resolver: MEMORY\nresolver_preload: {{\n{preload}\n}}\nmax_payload: 8MB\n"
        )
