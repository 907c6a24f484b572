"""A certificate authority of the tests' own, an HTTPS server on loopback it vouches for, and a resolver.

What a client's metadata document is fetched from in the tests (net/client_documents.py): the
authority and the server's certificate are made with the openssl command, as tests/e2e/tls.py
makes its certificate; the server answers each path with the bytes the test gives, and records
what it was asked, the TLS server name and the Host header included.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from clientmcp_fast.net.client_documents import Address, address_refusal

LOOPBACK = ipaddress.IPv4Address("127.0.0.1")


def only_this_loopback(address: Address) -> str | None:
    """The bridge's address policy, loosened for 127.0.0.1 alone: where the test's server listens."""
    return None if address == LOOPBACK else address_refusal(address)


class Resolver:
    """What every host name resolves to in a test (nothing: it does not resolve); the questions asked."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        if not self.addresses:
            raise OSError("no such host")
        return list(self.addresses)


def _openssl(*arguments: str) -> None:
    subprocess.run(["openssl", *arguments], check=True, capture_output=True)


@dataclass(frozen=True)
class Authority:
    """A certificate authority (its certificate, `ca`) and a server certificate and key it signed."""

    ca: Path
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client's TLS context that trusts this authority alone, and checks the server's name."""
        return ssl.create_default_context(cafile=str(self.ca))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert), str(self.key))
        return context


def make_authority(folder: Path, names: tuple[str, ...] = ("client.test",)) -> Authority:
    """A one-day authority, and a server certificate for `names` (DNS names) and 127.0.0.1, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, request, extensions = (
        folder / name for name in ("server.pem", "server.key", "server.csr", "ext.cnf")
    )
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=clientmcp test authority",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    _openssl("req", "-new", *ec, "-subj", f"/CN={names[0]}", "-keyout", str(key), "-out", str(request))
    alternatives = ",".join([*(f"DNS:{name}" for name in names), "IP:127.0.0.1"])
    extensions.write_text(
        f"subjectAltName={alternatives}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "1", "-extfile", str(extensions), "-out", str(cert))  # fmt: skip
    return Authority(ca, cert, key)


def answer(status: int, body: bytes, *headers: str, length: bool = True) -> bytes:
    """A whole HTTP/1.1 answer: its status, `headers` as written, and `body` with its Content-Length."""
    head = [f"HTTP/1.1 {status} X", *headers]
    if length:
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


Route = bytes | Callable[[asyncio.StreamWriter], Awaitable[None]]


@dataclass
class HttpsServer:
    """An HTTPS server on 127.0.0.1: `routes[path]` is its answer (bytes, or a coroutine that writes it)."""

    authority: Authority
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[tuple[str | None, bytes]] = field(default_factory=list)  # (TLS server name, request head)
    port: int = 0
    _server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> HttpsServer:
        context = self.authority.server_context()
        names: dict[object, str | None] = {}  # by the TLS connection: the server name it asked for
        context.sni_callback = lambda connection, name, _context: names.__setitem__(connection, name)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            self.requests.append((names.pop(writer.get_extra_info("ssl_object"), None), head))
            path = head.split(b" ", 2)[1].decode()
            route = self.routes.get(path, answer(404, b"not here"))
            try:
                if isinstance(route, bytes):
                    writer.write(route)
                else:
                    await route(writer)
                await writer.drain()
            except ConnectionError:
                pass
            writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, path: str, host: str = "client.test") -> str:
        return f"https://{host}:{self.port}{path}"

    def asked(self, path: str) -> int:
        """How many requests asked for `path`."""
        return sum(1 for _, head in self.requests if head.split(b" ", 2)[1].decode() == path)
