"""Client ID metadata documents fetched safely (net/client_documents.py, docs/oauth.md, Decisions).

The address policy alone, on addresses: every special-purpose one refused, an IPv6 address
carrying an IPv4 one judged by it. Then the fetch, against an HTTPS server on loopback whose
certificate a test authority signed (tests/https_server.py): the fetcher is told to trust that
authority, to take 127.0.0.1 (and nothing else the strict policy refuses), and what the test's
host name resolves to. Every refusal is an `invalid_client` OAuthError with its description,
or `temporarily_unavailable` for the bounds of the process.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re

import pytest
from https_server import HttpsServer, Resolver, answer, make_authority, only_this_loopback

from clientmcp_fast.core.oauth import (
    INVALID_CLIENT,
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_SECONDS,
    TEMPORARILY_UNAVAILABLE,
    OAuthError,
)
from clientmcp_fast.net.client_documents import (
    FETCH_SECONDS,
    FETCHES_PER_SECOND,
    MAX_DOCUMENTS,
    MAX_FETCHES,
    ClientDocuments,
    address_refusal,
)

# RFC 6749 §5.2: error_description holds %x20-21 / %x23-5B / %x5D-7E only.
DESCRIPTION = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")
PATH = "/oauth/client.json"
REDIRECT = "http://127.0.0.1:33418/callback"

pytestmark = pytest.mark.anyio


# -- the address policy ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [("127.0.0.1", "a loopback address"), ("127.255.0.9", "a loopback address"), ("::1", "a loopback address"),
     ("10.0.0.1", "a private address"), ("10.255.255.255", "a private address"),
     ("172.16.0.1", "a private address"), ("172.31.255.254", "a private address"),
     ("192.168.0.1", "a private address"), ("fc00::1", "a private address"), ("fd12:3456::1", "a private address"),
     ("169.254.169.254", "a link-local address"), ("fe80::1", "a link-local address"),
     ("febf::1", "a link-local address"), ("fe80::1%eth0", "a link-local address"),
     ("0.0.0.0", "the unspecified address"), ("::", "the unspecified address"),
     ("224.0.0.1", "a multicast address"), ("239.255.255.250", "a multicast address"),
     ("ff02::1", "a multicast address"), ("ff0e::1", "a multicast address"),
     ("0.1.2.3", "a special-purpose address (RFC 6890)"), ("100.64.0.1", "a special-purpose address (RFC 6890)"),
     ("192.0.2.1", "a special-purpose address (RFC 6890)"), ("198.18.0.1", "a special-purpose address (RFC 6890)"),
     ("240.0.0.1", "a special-purpose address (RFC 6890)"),
     ("255.255.255.255", "a special-purpose address (RFC 6890)"),
     ("2001:db8::1", "a special-purpose address (RFC 6890)"), ("2001::1", "a special-purpose address (RFC 6890)"),
     ("::ffff:127.0.0.1", "a loopback address inside an IPv6 address"),
     ("::ffff:10.0.0.1", "a private address inside an IPv6 address"),
     ("::ffff:172.16.5.4", "a private address inside an IPv6 address"),
     ("::ffff:192.168.1.1", "a private address inside an IPv6 address"),
     ("::ffff:169.254.169.254", "a link-local address inside an IPv6 address"),
     ("::ffff:0.0.0.0", "the unspecified address inside an IPv6 address"),
     ("::ffff:224.0.0.1", "a multicast address inside an IPv6 address"),
     ("64:ff9b::7f00:1", "a loopback address inside an IPv6 address"),
     ("64:ff9b::a9fe:a9fe", "a link-local address inside an IPv6 address"),
     ("2002:7f00:1::1", "a loopback address inside an IPv6 address"),
     ("2002:a00:1::1", "a private address inside an IPv6 address"),
     ("::127.0.0.1", "a deprecated IPv6 address"), ("::a00:1", "a deprecated IPv6 address"),
     ("fec0::1", "a deprecated IPv6 address")],
)  # fmt: skip
def test_every_address_that_is_not_global_unicast_is_refused(address, kind):
    assert address_refusal(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "192.169.0.1", "100.128.0.1", "2606:4700::1111",
     "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"],
)  # fmt: skip
def test_a_global_unicast_address_is_taken(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


# -- the fetch ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return make_authority(tmp_path_factory.mktemp("authority"))


@pytest.fixture(scope="module")
def other_authority(tmp_path_factory):
    return make_authority(tmp_path_factory.mktemp("other-authority"))


@pytest.fixture(scope="module")
def misnamed(tmp_path_factory):
    """An authority whose server certificate names another host (other.test, and 127.0.0.1)."""
    return make_authority(tmp_path_factory.mktemp("misnamed"), ("other.test",))


def document(url: str, **change) -> bytes:
    body = {"client_id": url, "client_name": "Document Host", "redirect_uris": [REDIRECT], **change}
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def documents_for(authority, resolver=None, **options) -> ClientDocuments:
    return ClientDocuments(
        asyncio.get_running_loop(),
        address_refusal=options.pop("address_refusal", only_this_loopback),
        ssl_context=options.pop("ssl_context", authority.client_context()),
        resolve=resolver or Resolver("127.0.0.1"),
        **options,
    )


async def refusal(documents: ClientDocuments, url: str, error: str = INVALID_CLIENT) -> str:
    with pytest.raises(OAuthError) as caught:
        await documents.client(url)
    assert caught.value.error == error
    assert DESCRIPTION.fullmatch(caught.value.description), caught.value.description
    return caught.value.description


async def test_a_document_is_fetched_from_the_checked_address_with_the_hosts_name(authority):
    resolver = Resolver("127.0.0.1")
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(200, document(url), "Content-Type: application/json")
        documents = documents_for(authority, resolver)
        client = await documents.client(url)
    assert (client.client_id, client.name, client.redirect_uris) == (url, "Document Host", (REDIRECT,))
    assert client.site == f"https://client.test:{server.port}"
    assert resolver.asked == [("client.test", server.port)]  # resolved once, never again to connect
    [(server_name, head)] = server.requests
    assert server_name == "client.test"  # TLS's server name is the host's, not the address's
    lines = head.decode().split("\r\n")
    assert lines[0] == f"GET {PATH} HTTP/1.1"
    assert f"Host: client.test:{server.port}" in lines and "Accept-Encoding: identity" in lines
    assert documents.fetches == 1 and len(documents) == 1


async def test_the_query_is_asked_for_and_an_ip_literal_is_not_resolved(authority):
    resolver = Resolver()
    async with HttpsServer(authority) as server:
        url = server.url(PATH + "?v=2", host="127.0.0.1")
        server.routes[PATH + "?v=2"] = answer(200, document(url))
        documents = documents_for(authority, resolver)
        assert (await documents.client(url)).client_id == url
    assert resolver.asked == []
    assert server.requests[0][0] is None  # no server name is sent for an address (RFC 6066 §3)


async def test_the_strict_policy_refuses_loopback_whatever_names_it(authority):
    async with HttpsServer(authority) as server:
        server.routes[PATH] = answer(200, document(server.url(PATH)))
        strict = documents_for(authority, address_refusal=address_refusal)
        description = await refusal(strict, server.url(PATH))
        assert description == (
            "the client's metadata document was not read: its host resolves to a loopback address, which this "
            "bridge never fetches from"
        )
        assert "127.0.0.1" not in description
        await refusal(strict, server.url(PATH, host="127.0.0.1"))
        await refusal(strict, f"https://[::1]:{server.port}{PATH}")
    assert server.requests == []  # refused before any connection


@pytest.mark.parametrize(
    "addresses",
    [("8.8.8.8", "10.0.0.1"), ("10.0.0.1", "8.8.8.8"), ("8.8.8.8", "::ffff:192.168.0.1"), ("169.254.169.254",),
     ("8.8.8.8", "fe80::1")],
)  # fmt: skip
async def test_a_host_with_any_address_that_is_not_global_is_refused(authority, addresses):
    documents = documents_for(authority, Resolver(*addresses), address_refusal=address_refusal)
    description = await refusal(documents, f"https://client.test{PATH}")
    assert "which this bridge never fetches from" in description


async def test_a_host_that_does_not_resolve_is_refused(authority):
    documents = documents_for(authority, Resolver())
    assert await refusal(documents, f"https://nowhere.test{PATH}") == (
        "the client's metadata document was not read: its host does not resolve"
    )


async def test_a_rebinding_name_is_dialled_at_the_address_checked(authority):
    """The name answers 127.0.0.1, then a private address: it was asked once, and 127.0.0.1 dialled."""
    resolver = Resolver("127.0.0.1")
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(200, document(url), "Cache-Control: no-store")
        documents = documents_for(authority, resolver)
        original = resolver.__call__

        async def rebinding(host, port):
            found = await original(host, port)
            resolver.addresses = ["10.0.0.1"]  # what a second question would hear
            return found

        documents.resolve = rebinding
        assert (await documents.client(url)).client_id == url
        assert len(resolver.asked) == 1 and len(server.requests) == 1
        # The next fetch asks again (no-store), hears the private address, and is refused.
        await refusal(documents, url)
        assert len(server.requests) == 1


async def test_only_a_certificate_of_a_trusted_authority_for_the_host_is_taken(
    authority, other_authority, misnamed
):
    async with HttpsServer(other_authority) as server:
        server.routes[PATH] = answer(200, document(server.url(PATH)))
        description = await refusal(documents_for(authority), server.url(PATH))
        assert description == (
            "the client's metadata document was not read: its host's certificate was not verified: no "
            "authority this bridge trusts signed it"
        )
    async with HttpsServer(misnamed) as server:
        server.routes[PATH] = answer(200, document(server.url(PATH)))
        description = await refusal(documents_for(misnamed), server.url(PATH))
        assert description.endswith("its host's certificate was not verified: it names another host")
        assert "client.test" not in description  # the host is the client's ID: never in a log line
    # The bridge's own default: the system's authorities, which know nothing of the test's.
    async with HttpsServer(authority) as server:
        server.routes[PATH] = answer(200, document(server.url(PATH)))
        default = ClientDocuments(
            asyncio.get_running_loop(), address_refusal=only_this_loopback, resolve=Resolver("127.0.0.1")
        )
        assert "certificate was not verified" in await refusal(default, server.url(PATH))


async def test_a_redirect_is_never_followed_and_only_200_is_an_answer(authority):
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(302, b"", f"Location: {server.url('/elsewhere')}")
        server.routes["/elsewhere"] = answer(200, document(url))
        documents = documents_for(authority)
        assert await refusal(documents, url) == (
            "the client's metadata document was not read: its URL answered 302, not 200 (this bridge follows no "
            "redirect)"
        )
        assert server.asked("/elsewhere") == 0
        server.routes[PATH] = answer(404, b"{}")
        assert "its URL answered 404, not 200" in await refusal(documents, url)
        server.routes[PATH] = answer(204, b"", length=False)
        assert "its URL answered 204, not 200" in await refusal(documents, url)
    assert len(documents) == 0  # an error is never kept


async def test_a_document_larger_than_the_bound_is_refused_however_it_is_sent(authority):
    large = b" " * MAX_DOCUMENT_BYTES + b"{}"
    too_large = f"the client's metadata document was not read: it is larger than {MAX_DOCUMENT_BYTES} bytes"

    async def endless(writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        for _ in range(1000):  # 16 MiB, never all read
            writer.write(b"x" * 16384)
            await writer.drain()

    async with HttpsServer(authority) as server:
        documents = documents_for(authority)
        for path, route in [
            ("/length", answer(200, large)),
            ("/chunked", answer(200, b"%x\r\n%s\r\n0\r\n\r\n" % (len(large), large), "Transfer-Encoding: chunked",
                                length=False)),
            ("/closed", answer(200, large, "Connection: close", length=False)),
            ("/endless", endless),
        ]:  # fmt: skip
            server.routes[path] = route
            assert await refusal(documents, server.url(path)) == too_large, path


async def test_a_document_at_the_bound_chunked_or_ended_by_the_close_is_read(authority):
    async with HttpsServer(authority) as server:
        documents = documents_for(authority)
        for path, framing in [("/chunked", "chunked"), ("/closed", "close")]:
            url = server.url(path)
            body = document(url)
            body += b" " * (MAX_DOCUMENT_BYTES - len(body))
            if framing == "chunked":
                route = answer(200, b"10\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (body[:16], len(body) - 16, body[16:]),
                               "Transfer-Encoding: chunked", length=False)  # fmt: skip
            else:
                route = answer(200, body, length=False)
            server.routes[path] = route
            assert (await documents.client(url)).client_id == url


async def test_an_answer_that_is_not_http_or_is_cut_short_is_refused(authority):
    async def cut(writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{")

    async with HttpsServer(authority) as server:
        documents = documents_for(authority)
        server.routes["/garbage"] = b"SSH-2.0-OpenSSH\r\n\r\n"
        server.routes["/cut"] = cut
        server.routes["/head"] = b"HTTP/1.1 200 OK\r\n" + b"X-Filler: " + b"y" * 9000 + b"\r\n\r\n{}"
        assert "its host's answer is not HTTP/1.1" in await refusal(documents, server.url("/garbage"))
        assert "closed the connection before the whole answer" in await refusal(documents, server.url("/cut"))
        assert "its answer's head is larger than 8192 bytes" in await refusal(documents, server.url("/head"))


async def test_a_fetch_has_its_time_bound_for_all_of_it(authority):
    async def silent(writer):
        await asyncio.sleep(30)

    assert FETCH_SECONDS == 5.0
    async with HttpsServer(authority) as server:
        server.routes[PATH] = silent
        documents = documents_for(authority, fetch_seconds=0.3)
        started = asyncio.get_running_loop().time()
        assert await refusal(documents, server.url(PATH)) == (
            "the client's metadata document was not read: it did not come within 0.3 s"
        )
        assert asyncio.get_running_loop().time() - started < 2

    async def slow_resolver(host, port):
        await asyncio.sleep(30)
        return ["127.0.0.1"]

    documents = documents_for(authority, slow_resolver, fetch_seconds=0.3)
    assert "it did not come within 0.3 s" in await refusal(documents, f"https://client.test{PATH}")


async def test_no_address_that_takes_the_connection_is_refused(authority):
    async with HttpsServer(authority) as server:
        port = server.port
    documents = documents_for(authority)
    assert await refusal(documents, f"https://client.test:{port}{PATH}") == (
        "the client's metadata document was not read: no address of its host took the connection"
    )


async def test_an_invalid_document_is_refused_and_never_kept(authority):
    async with HttpsServer(authority) as server:
        url = server.url(PATH)
        server.routes[PATH] = answer(200, document(url + "/"))
        documents = documents_for(authority)
        assert await refusal(documents, url) == (
            "the client's metadata document: its client_id is not its URL, byte for byte"
        )
        server.routes[PATH] = answer(200, document(url))
        assert (await documents.client(url)).client_id == url  # fetched again, now good
        assert server.asked(PATH) == 2


async def test_a_document_is_kept_as_its_cache_control_says_within_an_hour(authority):
    loop = asyncio.get_running_loop()
    async with HttpsServer(authority) as server:
        documents = documents_for(authority)
        for path, cache_control, kept_for in [
            ("/a", "max-age=120", 120), ("/b", "max-age=999999", MAX_DOCUMENT_SECONDS), ("/c", None, 300),
            ("/d", "no-store", None), ("/e", "max-age=0", None), ("/f", "max-age=600", 500),
        ]:  # fmt: skip
            url = server.url(path)
            headers = [f"Cache-Control: {cache_control}"] if cache_control else []
            if path == "/f":
                headers.append("Age: 100")
            server.routes[path] = answer(200, document(url), *headers)
            before = loop.time()
            client = await documents.client(url)
            entry = documents._kept.get(url)
            if kept_for is None:
                assert entry is None, path
                await documents.client(url)
                assert server.asked(path) == 2, path  # read again each time
                continue
            assert before + kept_for <= entry[0] <= loop.time() + kept_for, path
            assert await documents.client(url) is client  # kept: not fetched again
            assert server.asked(path) == 1, path
            assert documents.kept(url, entry[0]) is None  # expired at its time


async def test_requests_for_one_document_share_one_fetch(authority):
    release = asyncio.Event()

    async with HttpsServer(authority) as server:
        url = server.url(PATH)

        async def late(writer):
            await release.wait()
            writer.write(answer(200, document(url), "Cache-Control: no-store"))

        server.routes[PATH] = late
        documents = documents_for(authority)
        waiting = [asyncio.ensure_future(documents.client(url)) for _ in range(20)]
        await asyncio.sleep(0.2)
        waiting[0].cancel()  # one browser goes away: the fetch goes on for the others
        await asyncio.sleep(0.05)
        release.set()
        clients = await asyncio.gather(*waiting[1:])
    assert all(client is clients[0] for client in clients)
    assert server.asked(PATH) == 1 and documents.fetches == 1


async def test_fetches_at_once_and_a_second_are_bounded_in_the_process(authority):
    assert (MAX_FETCHES, FETCHES_PER_SECOND) == (8, 10.0)
    release = asyncio.Event()

    async def late(writer):
        await release.wait()
        writer.write(answer(404, b""))

    async with HttpsServer(authority) as server:
        documents = documents_for(authority, max_fetches=3, fetches_per_second=1000)
        for index in range(3):
            server.routes[f"/{index}"] = late
        waiting = [asyncio.ensure_future(documents.client(server.url(f"/{index}"))) for index in range(3)]
        await asyncio.sleep(0.2)
        assert await refusal(documents, server.url("/3"), TEMPORARILY_UNAVAILABLE) == (
            "3 client metadata documents are being read already: try again in a moment"
        )
        assert server.asked("/3") == 0
        release.set()
        await asyncio.gather(*waiting, return_exceptions=True)

        server.routes["/n"] = answer(404, b"")
        rated = documents_for(authority, fetches_per_second=2)
        for _ in range(2):
            await refusal(rated, server.url("/n"))
        assert await refusal(rated, server.url("/n"), TEMPORARILY_UNAVAILABLE) == (
            "more than 2 client metadata documents a second were asked for: try again in a moment"
        )
        assert server.asked("/n") == 2
        await asyncio.sleep(0.6)  # a second's allowance comes back as time goes
        await refusal(rated, server.url("/n"))


async def test_the_documents_kept_are_bounded_oldest_first(authority):
    assert MAX_DOCUMENTS == 1_000
    async with HttpsServer(authority) as server:
        documents = documents_for(authority, max_documents=2)
        urls = [server.url(f"/{index}") for index in range(3)]
        for index, url in enumerate(urls):
            server.routes[f"/{index}"] = answer(200, document(url))
            await documents.client(url)
        assert len(documents) == 2 and documents.forgotten == 1
        assert documents.kept(urls[0], asyncio.get_running_loop().time()) is None
        await documents.client(urls[0])
        assert server.asked("/0") == 2
