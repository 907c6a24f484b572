"""Client ID metadata documents, read safely (docs/oauth.md, Decisions): the fetch, its bounds, its cache.

A client known by a URL (draft-ietf-oauth-client-id-metadata-document) has its metadata read
from that URL at its authorization request. The URL is a stranger's choice, so this is the one
request the bridge makes on a stranger's word; what keeps it from reaching anything else (SSRF,
the draft's "Server Side Request Forgery (SSRF) Attacks"):

- `https://` only (core/oauth.py, `client_id_url_problem`), the certificate verified;
- the host resolved once, and refused if any of its addresses is not a global unicast one
  (`address_refusal`); the connection made to an address so checked, never to the name
  again, so that a second answer of the DNS cannot name another (DNS rebinding); TLS's
  server name and the Host header name the host;
- no redirect followed; the answer's head and body bounded and read as they come, the read
  stopped past the bound; 5 s for all of it, resolution included;
- at most 8 fetches at once and 10 started a second in the process, so that a flood of
  authorization requests cannot make the bridge fetch on its behalf; a document is fetched
  once for every request that waits for it, and kept as its Cache-Control says, an hour at
  most, 1,000 documents at most.

What the document must say is core/oauth.py's (`document_client`). Nothing here is reached
unless a request to `/oauth/authorize` names a client by a URL.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from clientmcp_fast import __version__
from clientmcp_fast.core.oauth import (
    INVALID_CLIENT,
    MAX_DOCUMENT_BYTES,
    TEMPORARILY_UNAVAILABLE,
    Client,
    OAuthError,
    client_id_url_parts,
    document_client,
    document_lifetime,
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

FETCH_SECONDS = 5.0  # resolution, connection, TLS, request and answer: all of a fetch
MAX_FETCHES = 8  # fetches at once in the process
FETCHES_PER_SECOND = 10.0  # fetches started a second in the process, a burst of as many
MAX_DOCUMENTS = 1_000  # documents kept, the oldest forgotten first
MAX_ANSWER_HEAD_BYTES = 8 * 1024
_READ_BYTES = 4096

# OpenSSL's verification codes (X509_V_ERR_*) said in words of our own: its own message names
# the host, which is the client's ID, and none is ever logged.
_CERTIFICATE_PROBLEMS = {
    10: ": it expired",
    18: ": no authority this bridge trusts signed it",
    19: ": no authority this bridge trusts signed it",
    20: ": no authority this bridge trusts signed it",
    62: ": it names another host",
}
_PRIVATE = tuple(
    ipaddress.ip_network(network) for network in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: an IPv4 address in its last 32 bits
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291 §2.5.5.1, deprecated


def address_refusal(address: Address) -> str | None:
    """What `address` is when the bridge never fetches from it (`a loopback address`), or None for a global unicast one.

    Every special-purpose address of RFC 6890 (what `is_global` is not), and multicast. An
    IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64, 6to4) is judged by the IPv4
    one, which is where it leads; the deprecated IPv4-compatible and site-local ones are refused.
    """
    if address.version == 6:
        embedded = address.ipv4_mapped or address.sixtofour  # type: ignore[union-attr]
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            refusal = address_refusal(embedded)
            return None if refusal is None else f"{refusal} inside an IPv6 address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if any(address in network for network in _PRIVATE):
        return "a private address"
    if address.version == 6 and (address in _IPV4_COMPATIBLE or address.is_site_local):  # type: ignore[union-attr]
        return "a deprecated IPv6 address"
    if not address.is_global:
        return "a special-purpose address (RFC 6890)"
    return None


def _refused(problem: str) -> OAuthError:
    return OAuthError(INVALID_CLIENT, f"the client's metadata document was not read: {problem}")


async def _resolve_with(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[str]:
    """Every address `host` has for a TCP connection, as the system's resolver gives them (off the loop)."""
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(info[4][0] for info in infos))


class _Answer:
    """httptools' callbacks for the answer to one GET: its status, the headers kept, the body, bounded."""

    def __init__(self) -> None:
        self.parser: Any = None
        self.head_done = False
        self.complete = False
        self.problem: str | None = None
        self.body = bytearray()
        self.cache_control: list[str] = []
        self.age: str | None = None
        self.framed = False  # Content-Length or chunked: else the body ends where the connection does

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"cache-control":
            self.cache_control.append(value.decode("latin-1"))
        elif name == b"age":
            self.age = value.decode("latin-1")
        elif name == b"content-length":
            self.framed = True
            if value.strip().isdigit() and int(value) > MAX_DOCUMENT_BYTES:
                self.problem = f"it is larger than {MAX_DOCUMENT_BYTES} bytes"
        elif name == b"transfer-encoding":
            self.framed = True

    def on_headers_complete(self) -> None:
        self.head_done = True
        status = self.parser.get_status_code()
        if status != 200 and self.problem is None:
            moved = " (this bridge follows no redirect)" if 300 <= status < 400 else ""
            self.problem = f"its URL answered {status}, not 200{moved}"

    def on_body(self, data: bytes) -> None:
        if len(self.body) + len(data) > MAX_DOCUMENT_BYTES:
            self.problem = self.problem or f"it is larger than {MAX_DOCUMENT_BYTES} bytes"
            return
        self.body += data

    def on_message_complete(self) -> None:
        self.complete = True


class ClientDocuments:
    """The metadata documents of the clients known by a URL, as this process reads and keeps them.

    `address_refusal`, `ssl_context` and `resolve(host, port)` are what a fetch trusts: which
    addresses it refuses, which certificates, and which addresses a name has. A bridge uses
    the defaults (every non-global address refused, the system's authorities, the system's
    resolver); the tests loosen the first for 127.0.0.1 alone, trust their own authority and
    name their own server.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        address_refusal: Callable[[Address], str | None] = address_refusal,
        ssl_context: ssl.SSLContext | None = None,
        resolve: Callable[[str, int], Awaitable[list[str]]] | None = None,
        fetch_seconds: float = FETCH_SECONDS,
        max_fetches: int = MAX_FETCHES,
        fetches_per_second: float = FETCHES_PER_SECOND,
        max_documents: int = MAX_DOCUMENTS,
    ) -> None:
        self.loop = loop
        self.address_refusal = address_refusal
        self.ssl_context = ssl_context  # None: the system's authorities, loaded with the first fetch
        self.resolve = resolve if resolve is not None else lambda host, port: _resolve_with(loop, host, port)
        self.fetch_seconds = fetch_seconds
        self.max_fetches = max_fetches
        self.fetches_per_second = fetches_per_second
        self.max_documents = max_documents
        self._kept: dict[str, tuple[float, Client]] = {}  # by URL: until when, and the client
        self._fetching: dict[str, asyncio.Task[Client]] = {}
        self._allowance = fetches_per_second
        self._allowance_at = loop.time()
        self.fetches = 0  # fetches started: requests this process made on a client's word
        self.forgotten = 0  # documents dropped for the bound before they expired

    def __len__(self) -> int:
        return len(self._kept)

    def kept(self, url: str, now: float) -> Client | None:
        """The client of the document kept for `url`, if it has not expired by `now` (the loop's clock)."""
        entry = self._kept.get(url)
        if entry is None:
            return None
        if entry[0] <= now:
            del self._kept[url]
            return None
        return entry[1]

    async def client(self, url: str) -> Client:
        """The client `url` names: its kept document, or one fetch for all that wait for it; raises OAuthError."""
        now = self.loop.time()
        client = self.kept(url, now)
        if client is not None:
            return client
        fetching = self._fetching.get(url)
        if fetching is None:
            self._may_start(now)
            fetching = self._fetching[url] = self.loop.create_task(self._read(url))
            fetching.add_done_callback(self._fetched)
        # One waiter going away (its browser closed) leaves the fetch to the others.
        return await asyncio.shield(fetching)

    def _may_start(self, now: float) -> None:
        """Take a fetch from the bounds; raises OAuthError(temporarily_unavailable) when there is none."""
        if len(self._fetching) >= self.max_fetches:
            raise OAuthError(
                TEMPORARILY_UNAVAILABLE,
                f"{self.max_fetches} client metadata documents are being read already: try again in a moment",
            )
        rate = self.fetches_per_second
        self._allowance = min(rate, self._allowance + (now - self._allowance_at) * rate)
        self._allowance_at = now
        if self._allowance < 1.0:
            raise OAuthError(
                TEMPORARILY_UNAVAILABLE,
                f"more than {rate:g} client metadata documents a second were asked for: try again in a moment",
            )
        self._allowance -= 1.0

    def _fetched(self, task: asyncio.Task[Client]) -> None:
        for url, fetching in self._fetching.items():
            if fetching is task:
                del self._fetching[url]
                break
        if not task.cancelled():
            task.exception()  # every waiter may have gone: the outcome is taken here, not left unretrieved

    def _keep(self, url: str, client: Client, until: float) -> None:
        kept = self._kept
        kept.pop(url, None)
        if len(kept) >= self.max_documents:
            oldest = next(iter(kept))
            if kept.pop(oldest)[0] > self.loop.time():
                self.forgotten += 1
        kept[url] = (until, client)

    async def _read(self, url: str) -> Client:
        """Fetch `url`'s document, check it, and keep it as long as its answer allows."""
        self.fetches += 1
        try:
            async with asyncio.timeout(self.fetch_seconds):
                body, cache_control, age = await self._fetch(url)
        except TimeoutError:
            raise _refused(f"it did not come within {self.fetch_seconds:g} s") from None
        client = document_client(url, body)
        lifetime = document_lifetime(cache_control, age)
        if lifetime > 0:
            self._keep(url, client, self.loop.time() + lifetime)
        return client

    async def _fetch(self, url: str) -> tuple[bytes, str | None, str | None]:
        """The body, Cache-Control and Age of the answer to a GET of `url`, within the rules above."""
        host, port, authority, target = client_id_url_parts(url)
        addresses = await self._addresses(host, port)
        reader, writer = await self._connect(addresses, host, port)
        try:
            writer.write(
                f"GET {target} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n"
                f"Accept-Encoding: identity\r\nUser-Agent: clientmcp-bridge/{__version__}\r\n"
                "Connection: close\r\n\r\n".encode("ascii")
            )
            answer = await self._answer(reader)
        finally:
            writer.close()
        return bytes(answer.body), ", ".join(answer.cache_control) or None, answer.age

    async def _addresses(self, host: str, port: int) -> list[Address]:
        """Every address of `host`, each one checked: one that may not be fetched from refuses them all."""
        try:
            addresses: list[Address] = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                found = await self.resolve(host, port)
                addresses = [ipaddress.ip_address(address) for address in found]
            except (OSError, UnicodeError, ValueError):
                raise _refused("its host does not resolve") from None
        if not addresses:
            raise _refused("its host does not resolve")
        for address in addresses:
            refusal = self.address_refusal(address)
            if refusal is not None:
                raise _refused(f"its host resolves to {refusal}, which this bridge never fetches from")
        return addresses

    async def _connect(
        self, addresses: list[Address], host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A TLS connection to the first of `addresses` that answers, verified for `host`."""
        if self.ssl_context is None:
            self.ssl_context = ssl.create_default_context()
        for address in addresses:
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                await self.loop.sock_connect(sock, (str(address), port))
            except OSError:
                sock.close()
                continue
            except BaseException:
                sock.close()
                raise
            try:
                return await asyncio.open_connection(sock=sock, ssl=self.ssl_context, server_hostname=host)
            except ssl.SSLCertVerificationError as error:
                sock.close()
                why = _CERTIFICATE_PROBLEMS.get(error.verify_code, "")
                raise _refused(f"its host's certificate was not verified{why}") from None
            except OSError:
                sock.close()
                raise _refused("the TLS handshake with its host failed") from None
            except BaseException:
                sock.close()
                raise
        raise _refused("no address of its host took the connection")

    async def _answer(self, reader: asyncio.StreamReader) -> _Answer:
        """The answer read from `reader`, as it comes, stopped at the first broken rule."""
        import httptools  # with the first document: a bridge that reads none never loads it

        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)

        def feed(data: bytes) -> None:
            if answer.complete:
                return  # what a host sends after its answer is not read
            try:
                parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade):
                raise _refused(answer.problem or "its host's answer is not HTTP/1.1") from None
            if answer.problem is not None:
                raise _refused(answer.problem)

        head_read = 0
        while not answer.complete:
            try:
                data = await reader.read(_READ_BYTES)
            except OSError:
                raise _refused("the connection to its host broke") from None
            if not data:
                if answer.head_done and not answer.framed:
                    break  # the body ends with the connection (RFC 9112 §6.3)
                raise _refused("its host closed the connection before the whole answer")
            if not answer.head_done:
                # The head is given no more than its bound: what follows it waits until it ended.
                room = MAX_ANSWER_HEAD_BYTES - head_read
                feed(data[:room])
                head_read += min(room, len(data))
                if not answer.head_done and head_read >= MAX_ANSWER_HEAD_BYTES:
                    raise _refused(f"its answer's head is larger than {MAX_ANSWER_HEAD_BYTES} bytes")
                data = data[room:]
            if data:
                feed(data)
        return answer
