"""OAuth 2.1 with nothing stored: the bridge as its own authorization server, each app a resource (docs/oauth.md).

Every credential is a compact HS256 JWS signed with the bridge's secret (core/tokens.py), each
with a role of its own, so that no verifier takes one for another, and no ClientMCP v1 verifier
takes any of them for an access token (its roles are `client` and `agent` only):

- a client ID carries its RFC 7591 registration (redirect URIs, name): role `oauth_client`;
- an authorization request waiting for consent, the consent page's hidden field: `oauth_request`;
- an authorization code (RFC 6749 §4.1.2), bound to the client, the redirect URI, the PKCE
  challenge (RFC 7636, S256 only) and the resource (RFC 8707): `oauth_code`, 60 s;
- a refresh token, rotated at each use (OAuth 2.1 §4.3.1): `oauth_refresh`;
- the access token is an agent token (role `agent`, `sub` the app's client ID, `aud` the
  resource, `gen`, at most 1 h): what `/mcp` and `/apps/<id>/mcp` verify.

A client may instead be known by a URL (draft-ietf-oauth-client-id-metadata-document): its
client_id is `https://host/path`, where its metadata document is. The rules of that URL and
of the document are here; fetching it is net/client_documents.py's.

What a process remembers is the codes and refresh tokens already used (`UsedOnce`), bounded,
until they expire: docs/oauth.md, Decisions, says what that guards and what it cannot.
Sans-I/O: the time (`now`, Unix seconds) and the randomness (`random(n)`, n bytes) come in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl, urlencode

import msgspec

from clientmcp_fast.core.tokens import (
    CLIENT_ID_PATTERN,
    ROLE_AGENT,
    TokenError,
    scope_of,
    sign_claims,
    verified_claims,
)

ROLE_OAUTH_CLIENT = "oauth_client"
ROLE_OAUTH_REQUEST = "oauth_request"
ROLE_OAUTH_CODE = "oauth_code"
ROLE_OAUTH_REFRESH = "oauth_refresh"

CODE_SECONDS = 60  # RFC 6749 §4.1.2 recommends at most 10 minutes; a client exchanges at once
ACCESS_SECONDS = 3600
REFRESH_SECONDS = 7 * 86400  # each rotation starts a new week...
GRANT_SECONDS = 30 * 86400  # ...within 30 days of the consent, then the person consents again
REQUEST_SECONDS = 600  # the consent page's request: 10 minutes for the person and the app

# Registration bounds (RFC 7591 §2): the whole registration travels in every client ID.
MAX_REGISTRATION_BYTES = 16 * 1024
MAX_REDIRECT_URIS = 4
MAX_REDIRECT_URI_LENGTH = 512
MAX_CLIENT_NAME = 100
# A credential or parameter longer than this is refused before any of it is decoded or hashed.
MAX_CREDENTIAL_LENGTH = 4096
MAX_FORM_BYTES = 16 * 1024
MAX_FORM_FIELDS = 32
MAX_STATE_LENGTH = 1024
MAX_SCOPE_LENGTH = 1024

# Client ID metadata documents (docs/oauth.md, Decisions). A document holds what a registration
# does, within the same bound; it travels in no token, so it may list more redirect URIs.
MAX_CLIENT_ID_URL_LENGTH = 512
MAX_DOCUMENT_BYTES = MAX_REGISTRATION_BYTES
MAX_DOCUMENT_REDIRECT_URIS = 16
# How long a fetched document is kept: its max-age (RFC 9111 §5.2.2.1), at most an hour, so
# that a changed or withdrawn document is read again within it; without one, 5 minutes.
DOCUMENT_SECONDS = 300
MAX_DOCUMENT_SECONDS = 3600

# The errors of RFC 6749 §4.1.2.1 and §5.2, RFC 7591 §3.2.2 and RFC 8707 §2.
INVALID_REQUEST = "invalid_request"
INVALID_CLIENT = "invalid_client"
INVALID_GRANT = "invalid_grant"
UNAUTHORIZED_CLIENT = "unauthorized_client"
UNSUPPORTED_GRANT_TYPE = "unsupported_grant_type"
UNSUPPORTED_RESPONSE_TYPE = "unsupported_response_type"
INVALID_SCOPE = "invalid_scope"
ACCESS_DENIED = "access_denied"
INVALID_TARGET = "invalid_target"
INVALID_REDIRECT_URI = "invalid_redirect_uri"
INVALID_CLIENT_METADATA = "invalid_client_metadata"
TEMPORARILY_UNAVAILABLE = "temporarily_unavailable"
ERRORS = (
    INVALID_REQUEST,
    INVALID_CLIENT,
    INVALID_GRANT,
    UNAUTHORIZED_CLIENT,
    UNSUPPORTED_GRANT_TYPE,
    UNSUPPORTED_RESPONSE_TYPE,
    INVALID_SCOPE,
    ACCESS_DENIED,
    INVALID_TARGET,
    INVALID_REDIRECT_URI,
    INVALID_CLIENT_METADATA,
    TEMPORARILY_UNAVAILABLE,
)

_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode

_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")  # RFC 7636 §4.1
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")  # RFC 7636 §4.2: BASE64URL(SHA256(verifier))
_VSCHAR = re.compile(r"[\x20-\x7e]*")  # RFC 6749 Appendix A.5 (state)
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*")  # RFC 6749 §3.3
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")  # RFC 3986 §3.1
_URI_CHARACTERS = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
_PORT = re.compile(r"[0-9]{1,5}")
# Schemes a browser runs or reads locally rather than hands to an application: never a redirect.
_REFUSED_SCHEMES = frozenset(("javascript", "data", "vbscript", "file", "blob", "about", "filesystem"))
# Loopback IP literals, where any port is the same redirect URI (RFC 8252 §7.3).
_LOOPBACK_IPS = ("127.0.0.1", "[::1]")
_LOOPBACK_HOSTS = ("localhost", *_LOOPBACK_IPS)
# The characters RFC 3986 §2 allows in a URI: a client ID URL holds no other (no backslash,
# which browsers read as a slash).
_URL_CHARACTERS = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")
# Path segments that are `.` or `..`, spelled out or percent-encoded (RFC 3986 §2.3, §5.2.4).
_DOT_SEGMENTS = frozenset((".", "..", "%2e", ".%2e", "%2e.", "%2e%2e"))
# RFC 6749 §5.2: error_description is %x20-21 / %x23-5B / %x5D-7E: no quote, no backslash.
_NOT_DESCRIPTION = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


class OAuthError(Exception):
    """A refused OAuth request: its error code, a description for the client, and the HTTP status."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = _NOT_DESCRIPTION.sub("?", description)
        self.status = status

    def body(self) -> bytes:
        """The JSON error body of RFC 6749 §5.2 (and RFC 7591 §3.2.2)."""
        return error_body(self.error, self.description)


class AuthorizeRefusal(OAuthError):
    """A refused authorization request; `redirect` is where the client hears of it, or None.

    None when the client or its redirect URI is not known to be good: the error is then
    shown to the person and never sent anywhere (RFC 6749 §4.1.2.1), so that the
    authorization endpoint is no open redirector.
    """

    def __init__(self, error: str, description: str, redirect: str | None) -> None:
        super().__init__(error, description)
        self.redirect = redirect


class RequestExpired(AuthorizeRefusal):
    """A consent page's request past its 10 minutes: `request` is what it asked, `redirect` tells its client."""

    def __init__(self, description: str, request: AuthorizeRequest, redirect: str) -> None:
        super().__init__(ACCESS_DENIED, description, redirect)
        self.request = request


def error_body(error: str, description: str) -> bytes:
    """`{"error": ..., "error_description": ...}` (RFC 6749 §5.2)."""
    return _encode_json({"error": error, "error_description": _NOT_DESCRIPTION.sub("?", description)})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    """The S256 code challenge of a code verifier (RFC 7636 §4.2)."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())


def pkce_matches(verifier: str, challenge: str) -> bool:
    """Whether `verifier` is a well-formed code verifier whose S256 challenge is `challenge` (RFC 7636 §4.6)."""
    if _VERIFIER.fullmatch(verifier) is None:
        return False
    return hmac.compare_digest(s256(verifier), challenge)


def client_key(client_id: str) -> str:
    """What a code or a refresh token names its client by: 128 bits of SHA-256 of the client ID."""
    return _b64(hashlib.sha256(client_id.encode("utf-8")).digest()[:16])


def parse_parameters(data: bytes, where: str) -> dict[str, str]:
    """The parameters of a query or a form body (application/x-www-form-urlencoded); raises OAuthError.

    RFC 6749 §3.1 and §3.2: a parameter sent without a value is as if omitted, and none may
    be sent twice.
    """
    try:
        text = data.decode("ascii")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS, errors="strict")
    except UnicodeDecodeError:
        raise OAuthError(
            INVALID_REQUEST, f"the {where} is not UTF-8 in application/x-www-form-urlencoded"
        ) from None
    except ValueError:
        raise OAuthError(INVALID_REQUEST, f"the {where} has more than {MAX_FORM_FIELDS} parameters") from None
    parameters: dict[str, str] = {}
    for name, value in pairs:
        if name in parameters:
            raise OAuthError(INVALID_REQUEST, f"the parameter {_shown(name)} is sent more than once")
        parameters[name] = value
    return {name: value for name, value in parameters.items() if value}


def _shown(name: str) -> str:
    """A parameter name fit for an error description: short, and only its allowed characters."""
    return _NOT_DESCRIPTION.sub("?", name[:40])


class Client:
    """A client: registered, as its client ID carries it (RFC 7591), or known by its metadata document's URL.

    `site` is where a client known by a URL publishes its document (`https://host[:port]`),
    which the consent page shows; None for a registered client.
    """

    __slots__ = ("client_id", "key", "redirect_uris", "name", "site")

    def __init__(
        self, client_id: str, redirect_uris: tuple[str, ...], name: str | None, site: str | None = None
    ) -> None:
        self.client_id = client_id
        self.key = client_key(client_id)
        self.redirect_uris = redirect_uris
        self.name = name
        self.site = site

    def redirect_for(self, given: str) -> str | None:
        """The registered redirect URI that `given` is, or None (OAuth 2.1 §2.3.1: an exact match).

        Exact, byte for byte, except that a loopback IP literal's port may be any (RFC 8252
        §7.3): a native client listens on a port the system gives it at the time.
        """
        if given in self.redirect_uris:
            return given
        loopback = _loopback_without_port(given)
        if loopback is not None:
            for registered in self.redirect_uris:
                if _loopback_without_port(registered) == loopback:
                    return given
        return None


def _loopback_without_port(uri: str) -> str | None:
    """`http://127.0.0.1/path` for `http://127.0.0.1:PORT/path` (or [::1]); None for any other URI."""
    if not uri.startswith("http://"):
        return None
    rest = uri[7:]
    for host in _LOOPBACK_IPS:
        if not rest.startswith(host):
            continue
        after = rest[len(host) :]
        if after.startswith(":"):
            end = _authority_end(after)
            if _PORT.fullmatch(after[1:end]) is None:
                return None
            after = after[end:]
        if after and after[0] not in "/?":  # 127.0.0.1.example is another host
            return None
        return "http://" + host + after
    return None


def _authority_end(text: str) -> int:
    """Where the authority at the start of `text` ends: at its path or its query, else at the end."""
    end = len(text)
    for separator in "/?":
        found = text.find(separator)
        if 0 <= found < end:
            end = found
    return end


def redirect_uri_problem(uri: object) -> str | None:
    """Why `uri` cannot be a registered redirect URI, or None when it can (RFC 6749 §3.1.2, RFC 8252 §7).

    An absolute URI of printable ASCII without a fragment: `https://` with a host, `http://`
    on loopback only, or an application's own scheme (`cursor://...`, `com.example.app:/cb`);
    never a scheme the browser runs itself (`javascript:`, `data:`).
    """
    if type(uri) is not str or not uri:
        return "a redirect URI is not a non-empty string"
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        return f"a redirect URI is longer than {MAX_REDIRECT_URI_LENGTH} characters"
    if _URI_CHARACTERS.fullmatch(uri) is None:
        return "a redirect URI holds a space, a control or a non-ASCII character"
    if "#" in uri:
        return "a redirect URI has a fragment"
    scheme, colon, rest = uri.partition(":")
    if not colon or _URI_SCHEME.fullmatch(scheme) is None:
        return "a redirect URI is not an absolute URI with a scheme"
    scheme = scheme.lower()
    if scheme in _REFUSED_SCHEMES:
        return f"a redirect URI of the scheme {scheme} is refused"
    if scheme in ("http", "https"):
        if not rest.startswith("//"):
            return f"a redirect URI of the scheme {scheme} has no authority (//host)"
        host = _host_of(rest[2:])
        if host is None:
            return "a redirect URI's host is not a DNS name or an IP literal, or its port is not a number"
        if "@" in rest[2:][: _authority_end(rest[2:])]:
            return "a redirect URI holds a user name"
        if scheme == "http" and host.lower() not in _LOOPBACK_HOSTS:
            return "an http:// redirect URI must be on loopback (127.0.0.1, [::1] or localhost): use https://"
    return None


def _host_of(authority_and_path: str) -> str | None:
    """The host of `[user@]host[:port][/path][?query]`, or None when the host or the port is malformed."""
    authority = authority_and_path[: _authority_end(authority_and_path)].rpartition("@")[2]
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return None
        host, port = authority[: close + 1], authority[close + 1 :]
    else:
        host, colon, number = authority.partition(":")
        port = colon + number
    if _HOST.fullmatch(host) is None or (port and _PORT.fullmatch(port[1:]) is None):
        return None
    return host


def redirect_origin(uri: str) -> str:
    """What the consent page names as where the client returns: `https://host[:port]`, or `scheme:`."""
    scheme, _, rest = uri.partition(":")
    if scheme.lower() in ("http", "https"):
        authority = rest[2:][: _authority_end(rest[2:])]
        return f"{scheme.lower()}://{authority.rpartition('@')[2].lower()}"
    return f"{scheme.lower()}:"


def client_name_problem(name: object) -> str | None:
    """Why `name` cannot be a client's name, or None: 1-100 characters, none a control or a format character.

    Format characters include the bidirectional overrides, which would let a name show as
    another on the consent page.
    """
    if type(name) is not str or not name.strip():
        return "client_name is not a non-empty string"
    if len(name) > MAX_CLIENT_NAME:
        return f"client_name is longer than {MAX_CLIENT_NAME} characters"
    if any(unicodedata.category(character) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp") for character in name):
        return "client_name holds a control, format or private-use character"
    return None


def _metadata_problem(metadata: dict, max_redirect_uris: int) -> tuple[str, str] | None:
    """What makes a registration's or a document's metadata unusable, as (RFC 7591 error, problem), or None.

    The redirect URIs (1 to `max_redirect_uris`, each as `redirect_uri_problem` allows), the
    name, and grant and response types that the authorization code grant can serve.
    """
    uris = metadata.get("redirect_uris")
    if type(uris) is not list or not 1 <= len(uris) <= max_redirect_uris:
        return INVALID_REDIRECT_URI, f"redirect_uris must be an array of 1-{max_redirect_uris} redirect URIs"
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            return INVALID_REDIRECT_URI, problem
    name = metadata.get("client_name")
    if name is not None:
        problem = client_name_problem(name)
        if problem is not None:
            return INVALID_CLIENT_METADATA, problem
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if (
        type(grant_types) is not list
        or "authorization_code" not in grant_types
        or not set(grant_types) <= {"authorization_code", "refresh_token"}
    ):
        return (
            INVALID_CLIENT_METADATA,
            "grant_types must include authorization_code and may add refresh_token, nothing else",
        )
    response_types = metadata.get("response_types", ["code"])
    if type(response_types) is not list or set(response_types) != {"code"}:
        return INVALID_CLIENT_METADATA, "response_types must be [code]"
    return None


# -- client ID metadata documents (draft-ietf-oauth-client-id-metadata-document) --------------


def is_client_id_url(client_id: str) -> bool:
    """Whether `client_id` is meant as a URL: it holds a colon, which no client ID this bridge issues does."""
    return ":" in client_id


def client_id_url_problem(url: str) -> str | None:
    """Why `url` cannot name a client's metadata document, or None when it can (the draft's "Client Identifier URL").

    `https://`, a host and a path other than `/`; no user name, no fragment, no `.` or `..`
    segment; only the characters of a URI. It is compared byte for byte, never normalised.
    """
    if len(url) > MAX_CLIENT_ID_URL_LENGTH:
        return f"it is longer than {MAX_CLIENT_ID_URL_LENGTH} characters"
    if _URL_CHARACTERS.fullmatch(url) is None:
        return "it holds a space, a backslash, a control or a non-ASCII character"
    if not url.startswith("https://"):
        return "it does not start with https://"
    if "#" in url:
        return "it has a fragment"
    rest = url[8:]
    end = _authority_end(rest)
    if "@" in rest[:end]:
        return "it holds a user name"
    host = _host_of(rest)
    port = rest[:end][len(host) + 1 :] if host is not None else ""
    if host is None or (port and not 1 <= int(port) <= 65535) or not _ip_literal_is_valid(host):
        return "its host is not a DNS name or an IP literal, or its port is not one from 1 to 65535"
    path = rest[end:].partition("?")[0]
    if path in ("", "/"):
        return "it has no path: a document is at https://host/path"
    if any(segment.lower() in _DOT_SEGMENTS for segment in path.split("/")):
        return "it has a . or .. path segment"
    return None


def _ip_literal_is_valid(host: str) -> bool:
    """Whether `host` is no IPv6 literal (`[...]`), or one that holds an IPv6 address."""
    if not host.startswith("["):
        return True
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True


def client_id_url_parts(url: str) -> tuple[str, int, str, str]:
    """(host, port, authority, target) of a valid client ID URL: what to resolve and dial, Host, and what to GET.

    The host is lower-cased, an IPv6 literal without its brackets; the authority is the URL's,
    for the Host header; the target is the path and the query.
    """
    rest = url[8:]
    end = _authority_end(rest)
    authority = rest[:end]
    host = _host_of(rest) or ""
    port = authority[len(host) + 1 :]
    if host.startswith("["):
        host = host[1:-1]
    return host.lower(), int(port) if port else 443, authority, rest[end:]


def document_client(url: str, body: bytes) -> Client:
    """The client the metadata document `body`, fetched from `url`, describes; raises OAuthError(invalid_client).

    A JSON object whose `client_id` is `url` byte for byte, with redirect URIs as a
    registration's, and no secret: a document cannot keep one, so the client is public
    (`token_endpoint_auth_method` none, or absent). Its other members are not read, and no
    URL in it is ever fetched.
    """

    def refused(problem: str) -> OAuthError:
        return OAuthError(INVALID_CLIENT, f"the client's metadata document: {problem}")

    if len(body) > MAX_DOCUMENT_BYTES:
        raise refused(f"it is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        metadata = _decode_json(body)
    except msgspec.DecodeError:
        raise refused("it is not JSON") from None
    if type(metadata) is not dict:
        raise refused("it is not a JSON object")
    if "client_id" not in metadata:
        raise refused("it has no client_id")
    if metadata["client_id"] != url:
        raise refused("its client_id is not its URL, byte for byte")
    if "client_secret" in metadata or "client_secret_expires_at" in metadata:
        raise refused("it holds a client_secret, which no document may")
    if metadata.get("token_endpoint_auth_method", "none") != "none":
        raise refused("token_endpoint_auth_method must be none: this bridge takes public clients only")
    problem = _metadata_problem(metadata, MAX_DOCUMENT_REDIRECT_URIS)
    if problem is not None:
        raise refused(problem[1])
    uris = tuple(dict.fromkeys(metadata["redirect_uris"]))
    return Client(url, uris, metadata.get("client_name"), redirect_origin(url))


def document_lifetime(cache_control: str | None, age: str | None = None) -> float:
    """How many seconds a fetched document may be kept, from its answer's Cache-Control and Age (RFC 9111).

    `max-age` less the `Age`, at most an hour; 5 minutes when there is no `max-age`; 0 (read
    again each time) with `no-store` or `no-cache`, or a `max-age` that is not one number
    (RFC 9111 §4.2.1: then the answer is stale).
    """
    max_age: float | None = None
    seen = False
    for directive in (cache_control or "").split(","):
        name, equals, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            if seen or not equals or not value.isdigit() or not value.isascii():
                max_age = 0.0
            else:
                max_age = float(value)
            seen = True
    if max_age is None:
        return float(DOCUMENT_SECONDS)
    if age is not None and age.strip().isdigit() and age.strip().isascii():
        max_age -= int(age.strip())
    return max(0.0, min(max_age, float(MAX_DOCUMENT_SECONDS)))


def _with_parameters(uri: str, parameters: Sequence[tuple[str, str]]) -> str:
    """`uri` with `parameters` added to its query (RFC 6749 §4.1.2, application/x-www-form-urlencoded)."""
    return uri + ("&" if "?" in uri else "?") + urlencode(parameters)


class AuthorizeRequest:
    """A valid authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2): what a code will be bound to.

    `id` names the request once it waits for consent (the `authorize` message's id).
    """

    __slots__ = (
        "id",
        "client_key",
        "client_name",
        "redirect_uri",
        "redirect_given",
        "state",
        "challenge",
        "resource",
        "app_id",
        "scope",
        "client_site",
    )

    def __init__(
        self,
        client_key: str,
        client_name: str | None,
        redirect_uri: str,
        redirect_given: bool,
        state: str | None,
        challenge: str,
        resource: str,
        app_id: str,
        scope: str | None,
        request_id: str = "",
        client_site: str | None = None,
    ) -> None:
        self.id = request_id
        self.client_site = client_site  # a client known by its document's URL: where it publishes it
        self.client_key = client_key
        self.client_name = client_name
        self.redirect_uri = redirect_uri
        self.redirect_given = redirect_given  # RFC 6749 §4.1.3: then the token request repeats it
        self.state = state
        self.challenge = challenge
        self.resource = resource
        self.app_id = app_id
        self.scope = scope


class UsedOnce:
    """Credentials already used, each remembered until it expires: a second use is caught (per process).

    Bounded: past `max_entries`, the entry remembered longest is forgotten first (docs/oauth.md,
    Decisions, and docs/limits.md). Expired entries are dropped from the front as time goes;
    one that expires before an entry added earlier waits behind it, counted as gone.
    """

    __slots__ = ("_until", "max_entries", "forgotten")

    def __init__(self, max_entries: int) -> None:
        self._until: dict[str, float] = {}
        self.max_entries = max_entries
        self.forgotten = 0  # entries dropped for the bound before they expired

    def __len__(self) -> int:
        return len(self._until)

    def _expire(self, now: float) -> None:
        until = self._until
        while until:
            key = next(iter(until))
            if until[key] > now:
                break
            del until[key]

    def seen(self, key: str, now: float) -> bool:
        """Whether `key` was added and has not expired by `now`."""
        self._expire(now)
        return self._until.get(key, now) > now

    def add(self, key: str, until: float, now: float) -> bool:
        """Remember `key` until `until`; False (and nothing changes) when it is remembered already."""
        if self.seen(key, now):
            return False
        remembered = self._until
        remembered.pop(key, None)  # expired behind a later entry: remembered again, at the back
        if len(remembered) >= self.max_entries:
            del remembered[next(iter(remembered))]
            self.forgotten += 1
        remembered[key] = until
        return True


def _claims(
    secrets: Sequence[bytes], token: str, role: str, what: str, now: float, error: str = INVALID_GRANT
) -> dict:
    """The claims of a credential of `role`, unexpired at `now`; raises OAuthError(`error`) otherwise."""
    if len(token) > MAX_CREDENTIAL_LENGTH:
        raise OAuthError(error, f"the {what} is longer than any this bridge issues")
    try:
        claims = verified_claims(secrets, token)
    except (TokenError, UnicodeError):
        raise OAuthError(error, f"the {what} is not one this bridge issued") from None
    if claims.get("role") != role:
        raise OAuthError(error, f"the {what} is not one this bridge issued")
    exp = claims.get("exp")
    if type(exp) is not int:
        raise OAuthError(error, f"the {what} is not one this bridge issued")
    if now >= exp:
        raise OAuthError(error, f"the {what} expired")
    return claims


class AuthorizationServer:
    """The OAuth 2.1 authorization server of one bridge, and the metadata of its resources.

    `public_url` is the issuer (an origin, config.parse_public_url); `secrets` verify,
    `signing_secret` signs, as for every token of the bridge; `random(n)` gives n random
    bytes. The memories of used codes and refresh tokens are this process's.
    `client_documents`: whether a client may be known by the URL of its metadata document,
    which the metadata then says (the I/O side reads the documents).
    """

    def __init__(
        self,
        public_url: str,
        secrets: Sequence[bytes],
        signing_secret: bytes,
        random: Callable[[int], bytes],
        *,
        max_used_codes: int = 10_000,
        max_used_refresh_tokens: int = 50_000,
        max_revoked_grants: int = 10_000,
        client_documents: bool = False,
    ) -> None:
        self.issuer = public_url
        self.client_documents = client_documents
        self.authorization_endpoint = public_url + "/oauth/authorize"
        self.token_endpoint = public_url + "/oauth/token"
        self.registration_endpoint = public_url + "/oauth/register"
        self._secrets = tuple(secrets)
        self._signing = signing_secret
        self._random = random
        self.used_codes = UsedOnce(max_used_codes)
        self.used_refresh_tokens = UsedOnce(max_used_refresh_tokens)
        # Grants whose code or refresh token was presented twice: every later refresh of the
        # grant is refused here (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1).
        self.revoked_grants = UsedOnce(max_revoked_grants)
        self.tokens_issued = {"authorization_code": 0, "refresh_token": 0}  # token responses, by grant type
        metadata: dict[str, object] = {
            "issuer": public_url,
            "authorization_endpoint": self.authorization_endpoint,
            "token_endpoint": self.token_endpoint,
            "registration_endpoint": self.registration_endpoint,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }
        if client_documents:
            # The draft's "Authorization Server Metadata": hosts that can then use their URL rather than register.
            metadata["client_id_metadata_document_supported"] = True
        self.metadata = _encode_json(metadata)

    def _new_id(self) -> str:
        return _b64(self._random(16))

    # -- resources (RFC 9728, RFC 8707) ------------------------------------------------------

    def resource_url(self, app_id: str) -> str:
        """The protected resource of the app `app_id`: its agent endpoint."""
        return f"{self.issuer}/apps/{app_id}/mcp"

    def resource_metadata_url(self, app_id: str) -> str:
        """Where the metadata of `app_id`'s resource is (RFC 9728 §3.1: the well-known path before the resource's)."""
        return f"{self.issuer}/.well-known/oauth-protected-resource/apps/{app_id}/mcp"

    def resource_metadata(self, app_id: str) -> bytes:
        """The protected resource metadata of `app_id`'s resource (RFC 9728 §2)."""
        return _encode_json(
            {
                "resource": self.resource_url(app_id),
                "authorization_servers": [self.issuer],
                "bearer_methods_supported": ["header"],
                "resource_name": app_id,
            }
        )

    def challenge(self, app_id: str, problem: bool) -> bytes:
        """The WWW-Authenticate value of a 401 from `app_id`'s resource (RFC 6750 §3, RFC 9728 §5.1)."""
        value = f'Bearer resource_metadata="{self.resource_metadata_url(app_id)}"'
        if problem:
            value += ', error="invalid_token"'
        return value.encode("ascii")

    def app_of_resource(self, resource: str) -> str | None:
        """The app whose resource `resource` names, or None when it names no resource of this bridge.

        Scheme and host are compared without case, as the MCP authorization page asks a
        server to accept; the rest exactly.
        """
        origin = self.issuer
        if len(resource) <= len(origin) or resource[: len(origin)].lower() != origin:
            return None
        path = resource[len(origin) :]
        if not path.startswith("/apps/") or not path.endswith("/mcp"):
            return None
        app_id = path[6:-4]
        return app_id if CLIENT_ID_PATTERN.fullmatch(app_id) else None

    # -- registration (RFC 7591) -------------------------------------------------------------

    def register(self, body: bytes, now: float) -> bytes:
        """The registration response (RFC 7591 §3.2.1) for a registration request's body; raises OAuthError.

        The client ID is the registration itself, signed: nothing is stored. The client is
        public (`token_endpoint_auth_method` none, whatever it asked: RFC 7591 §3.2.1 lets
        the server replace a value), and its other metadata are not kept.
        """
        if len(body) > MAX_REGISTRATION_BYTES:
            raise OAuthError(
                INVALID_CLIENT_METADATA, f"the registration is larger than {MAX_REGISTRATION_BYTES} bytes"
            )
        try:
            metadata = _decode_json(body)
        except msgspec.DecodeError:
            raise OAuthError(INVALID_CLIENT_METADATA, "the registration is not JSON") from None
        if type(metadata) is not dict:
            raise OAuthError(INVALID_CLIENT_METADATA, "the registration is not a JSON object")
        problem = _metadata_problem(metadata, MAX_REDIRECT_URIS)
        if problem is not None:
            raise OAuthError(*problem)
        uris, name = metadata["redirect_uris"], metadata.get("client_name")
        claims: dict[str, object] = {
            "role": ROLE_OAUTH_CLIENT,
            "jti": self._new_id(),
            "iat": int(now),
            "redirect_uris": list(dict.fromkeys(uris)),
        }
        if name is not None:
            claims["client_name"] = name
        client_id = sign_claims(self._signing, claims)
        registered: dict[str, object] = {
            "client_id": client_id,
            "client_id_issued_at": int(now),
            "redirect_uris": claims["redirect_uris"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
        if name is not None:
            registered["client_name"] = name
        return _encode_json(registered)

    def document_url(self, client_id: str) -> str:
        """`client_id`, a URL, as the URL of a metadata document to read; raises OAuthError(invalid_client).

        Refused when this bridge reads no documents (`client_documents` off) or when the URL
        breaks a rule of `client_id_url_problem`.
        """
        if not self.client_documents:
            raise OAuthError(
                INVALID_CLIENT,
                "client_id is a URL, and this bridge reads no client ID metadata documents: register at "
                "/oauth/register",
            )
        problem = client_id_url_problem(client_id)
        if problem is not None:
            raise OAuthError(
                INVALID_CLIENT, f"client_id is not the URL of a client ID metadata document: {problem}"
            )
        return client_id

    def document_to_read(self, query: bytes) -> str | None:
        """The URL of the document an authorization request's client is read from, or None; raises AuthorizeRefusal.

        None for a registered client. Every refusal here is for the person's eyes only: the
        client is not known yet.
        """
        try:
            client_id = parse_parameters(query, "query").get("client_id")
            if client_id is None or not is_client_id_url(client_id):
                return None
            return self.document_url(client_id)
        except OAuthError as error:
            raise AuthorizeRefusal(error.error, error.description, None) from None

    def client(self, client_id: str | None) -> Client:
        """The client a client ID names; raises OAuthError(invalid_client) unless this bridge issued it.

        A client ID metadata document's URL names its client as well, with no redirect URI:
        they are read from the document, at the authorization request (`document_client`).
        """
        if not client_id:
            raise OAuthError(INVALID_CLIENT, "client_id is missing: this bridge has public clients only")
        if is_client_id_url(client_id):
            url = self.document_url(client_id)
            return Client(url, (), None, redirect_origin(url))
        if len(client_id) > MAX_CREDENTIAL_LENGTH:
            raise OAuthError(INVALID_CLIENT, "client_id is longer than any this bridge issues")
        try:
            claims = verified_claims(self._secrets, client_id)
        except (TokenError, UnicodeError):
            raise OAuthError(
                INVALID_CLIENT, "client_id is not one this bridge issued: register at /oauth/register"
            ) from None
        uris = claims.get("redirect_uris")
        name = claims.get("client_name")
        if (
            claims.get("role") != ROLE_OAUTH_CLIENT
            or type(uris) is not list
            or not uris
            or any(type(uri) is not str for uri in uris)
            or (name is not None and type(name) is not str)
        ):
            raise OAuthError(
                INVALID_CLIENT, "client_id is not one this bridge issued: register at /oauth/register"
            )
        return Client(client_id, tuple(uris), name)

    # -- authorization (RFC 6749 §4.1.1, RFC 7636, RFC 8707, RFC 9207) -------------------------

    def authorize_request(self, query: bytes, document: Client | None = None) -> AuthorizeRequest:
        """The valid authorization request a query holds; raises AuthorizeRefusal.

        The client and its redirect URI are checked first: until both are good, a refusal
        is for the person's eyes only (`redirect` None); after, the client hears of it.
        `document` is the client that `document_to_read` named, read from its document
        (`document_client`); its redirect URIs are then matched as a registered client's.
        """
        try:
            parameters = parse_parameters(query, "query")
        except OAuthError as error:
            raise AuthorizeRefusal(error.error, error.description, None) from None
        client_id = parameters.get("client_id")
        if document is not None:
            if document.client_id != client_id:
                raise ValueError("the document read is not the one of the request's client_id")
            client = document
        else:
            try:
                client = self.client(client_id)
            except OAuthError as error:
                raise AuthorizeRefusal(error.error, error.description, None) from None
            if client.site is not None:
                raise AuthorizeRefusal(INVALID_CLIENT, "the client's metadata document was not read", None)
        given = parameters.get("redirect_uri")
        if given is None:
            if len(client.redirect_uris) != 1:
                raise AuthorizeRefusal(
                    INVALID_REQUEST, "redirect_uri is missing, and the client registered several", None
                )
            redirect_uri = client.redirect_uris[0]
        else:
            matched = client.redirect_for(given)
            if matched is None:
                raise AuthorizeRefusal(
                    INVALID_REQUEST, "redirect_uri is not one the client registered, byte for byte", None
                )
            redirect_uri = matched
        state = parameters.get("state")
        if state is not None and (len(state) > MAX_STATE_LENGTH or _VSCHAR.fullmatch(state) is None):
            raise self._refusal(
                redirect_uri,
                None,
                INVALID_REQUEST,
                f"state must be at most {MAX_STATE_LENGTH} printable ASCII characters",
            )

        def refuse(error: str, description: str) -> AuthorizeRefusal:
            return self._refusal(redirect_uri, state, error, description)

        response_type = parameters.get("response_type")
        if response_type is None:
            raise refuse(INVALID_REQUEST, "response_type is missing: it must be code")
        if response_type != "code":
            raise refuse(
                UNSUPPORTED_RESPONSE_TYPE, "response_type must be code (the authorization code grant)"
            )
        challenge = parameters.get("code_challenge")
        if challenge is None:
            raise refuse(INVALID_REQUEST, "code_challenge is missing: PKCE (RFC 7636) with S256 is required")
        method = parameters.get("code_challenge_method")
        if method != "S256":
            # RFC 7636 §4.3: an absent method means plain, which OAuth 2.1 leaves to the server to refuse.
            raise refuse(
                INVALID_REQUEST, "transform algorithm not supported: code_challenge_method must be S256"
            )
        if _S256_CHALLENGE.fullmatch(challenge) is None:
            raise refuse(INVALID_REQUEST, "code_challenge is not an S256 challenge (43 base64url characters)")
        resource = parameters.get("resource")
        if resource is None:
            raise refuse(
                INVALID_TARGET, f"resource is missing: name the app, {self.resource_url('<client-id>')}"
            )
        app_id = self.app_of_resource(resource)
        if app_id is None:
            raise refuse(
                INVALID_TARGET, f"resource is not an app of this bridge: {self.resource_url('<client-id>')}"
            )
        scope = parameters.get("scope")
        if scope is not None and (len(scope) > MAX_SCOPE_LENGTH or _SCOPE.fullmatch(scope) is None):
            raise refuse(INVALID_SCOPE, "scope is not a list of scope tokens separated by single spaces")
        return AuthorizeRequest(
            client.key,
            client.name,
            redirect_uri,
            given is not None,
            state,
            challenge,
            self.resource_url(app_id),
            app_id,
            scope,
            client_site=client.site,
        )

    def _refusal(
        self, redirect_uri: str, state: str | None, error: str, description: str
    ) -> AuthorizeRefusal:
        refusal = AuthorizeRefusal(error, description, None)
        parameters = [("error", error), ("error_description", refusal.description)]
        if state is not None:
            parameters.append(("state", state))
        parameters.append(("iss", self.issuer))
        refusal.redirect = _with_parameters(redirect_uri, parameters)
        return refusal

    def denied(self, request: AuthorizeRequest, description: str) -> str:
        """Where the client hears that the request was refused (`access_denied`): its redirect URI, with `iss`."""
        return self._refusal(request.redirect_uri, request.state, ACCESS_DENIED, description).redirect  # type: ignore[return-value]

    def authorization_response(self, request: AuthorizeRequest, code: str) -> str:
        """The redirect that hands the client its code (RFC 6749 §4.1.2), with `state` and `iss` (RFC 9207 §2)."""
        parameters = [("code", code)]
        if request.state is not None:
            parameters.append(("state", request.state))
        parameters.append(("iss", self.issuer))
        return _with_parameters(request.redirect_uri, parameters)

    # -- the request waiting for consent (the page's hidden field) ---------------------------

    def pending(self, request: AuthorizeRequest, now: float) -> str:
        """`request` signed, for the consent page to carry: any instance can serve the next step.

        It gets its id here (the `authorize` message's), and 10 minutes to be answered.
        """
        request.id = self._new_id()
        claims: dict[str, object] = {
            "role": ROLE_OAUTH_REQUEST,
            "jti": request.id,
            "exp": int(now + REQUEST_SECONDS),
            "cid": request.client_key,
            "rdr": request.redirect_uri,
            "rdg": request.redirect_given,
            "pkce": request.challenge,
            "aud": request.resource,
            "app": request.app_id,
        }
        for name, value in (
            ("name", request.client_name),
            ("st", request.state),
            ("scope", request.scope),
            ("site", request.client_site),
        ):
            if value is not None:
                claims[name] = value
        return sign_claims(self._signing, claims)

    def read_pending(self, value: str, now: float) -> AuthorizeRequest:
        """The request a consent page carried; raises OAuthError(invalid_request) if forged, RequestExpired if expired.

        An expired request is still this bridge's: its client hears of it (`access_denied`).
        """
        # Its expiry is checked below, once the request can be named in the refusal.
        claims = _claims(
            self._secrets, value, ROLE_OAUTH_REQUEST, "authorization request", -math.inf, INVALID_REQUEST
        )
        request = AuthorizeRequest(
            claims["cid"],
            claims.get("name"),
            claims["rdr"],
            claims["rdg"],
            claims.get("st"),
            claims["pkce"],
            claims["aud"],
            claims["app"],
            claims.get("scope"),
            claims["jti"],
            claims.get("site"),
        )
        if now >= claims["exp"]:
            description = "the authorization request expired: no answer within 10 minutes"
            raise RequestExpired(description, request, self.denied(request, description))
        return request

    def csrf_token(self, cookie: str, request_id: str) -> str:
        """The consent form's CSRF token: bound to the browser's cookie and to the request (docs/oauth.md)."""
        mac = hmac.new(self._signing, f"csrf\0{cookie}\0{request_id}".encode(), hashlib.sha256)
        return _b64(mac.digest())

    def csrf_matches(self, cookie: str | None, request_id: str, token: str | None) -> bool:
        """Whether a consent form's CSRF token is the one made for this cookie and request, under any secret."""
        if not cookie or not token or len(cookie) > 64 or len(token) > 64:
            return False
        expected = f"csrf\0{cookie}\0{request_id}".encode()
        return any(
            hmac.compare_digest(_b64(hmac.new(secret, expected, hashlib.sha256).digest()), token)
            for secret in self._secrets
        )

    def new_cookie(self) -> str:
        """A random value for the browser's consent cookie."""
        return self._new_id()

    # -- codes and tokens (RFC 6749 §4.1.3, §5, §6) ------------------------------------------

    def issue_code(
        self, request: AuthorizeRequest, now: float, gen: int, tools: Sequence[str] | None = None
    ) -> str:
        """An authorization code for a consented request, valid 60 s (RFC 6749 §4.1.2).

        `gen` is the app's current agent generation; `tools` the scope the app consented to
        (docs/protocol.md, Scoped agent tokens), or None for every tool.
        """
        code_id = self._new_id()
        claims: dict[str, object] = {
            "role": ROLE_OAUTH_CODE,
            "jti": code_id,
            "iat": int(now),
            "exp": int(now + CODE_SECONDS),
            "sub": request.app_id,
            "aud": request.resource,
            "cid": request.client_key,
            "rdr": request.redirect_uri,
            "rdg": request.redirect_given,
            "pkce": request.challenge,
            "gen": gen,
            # The grant this code starts: its refresh tokens carry it, so that a replayed code
            # or refresh token ends them all (RFC 6749 §4.1.2).
            "grant": code_id,
            "auth_time": int(now),
        }
        if request.scope is not None:
            claims["scope"] = request.scope
        if tools is not None:
            tools = list(tools)
            try:
                scope_of(tools)
            except TokenError:
                raise ValueError("tools must be 1-1000 tool names or prefixes ending in *") from None
            claims["tools"] = tools
        return sign_claims(self._signing, claims)

    def token(self, body: bytes, now: float, generation: Callable[[str], int]) -> bytes:
        """The token response (RFC 6749 §5.1) to a token request's form body; raises OAuthError (§5.2).

        `generation(app_id)` is the app's current agent generation: a grant of an older one
        was revoked (`clientmcp revoke agent`).
        """
        if len(body) > MAX_FORM_BYTES:
            raise OAuthError(INVALID_REQUEST, f"the body is larger than {MAX_FORM_BYTES} bytes")
        form = parse_parameters(body, "body")
        grant_type = form.get("grant_type")
        if grant_type is None:
            raise OAuthError(INVALID_REQUEST, "grant_type is missing")
        if grant_type == "authorization_code":
            answer = self._exchange_code(form, now, generation)
        elif grant_type == "refresh_token":
            answer = self._refresh(form, now, generation)
        else:
            raise OAuthError(UNSUPPORTED_GRANT_TYPE, "grant_type must be authorization_code or refresh_token")
        self.tokens_issued[grant_type] += 1
        return answer

    def _presented(self, form: dict[str, str], field: str, role: str, what: str, now: float) -> dict:
        """The claims of the credential in `field` (a code or a refresh token), issued to the form's client."""
        client = self.client(form.get("client_id"))
        credential = form.get(field)
        if credential is None:
            raise OAuthError(INVALID_REQUEST, f"{field} is missing")
        claims = _claims(self._secrets, credential, role, what, now)
        if claims.get("cid") != client.key:
            raise OAuthError(INVALID_GRANT, f"the {what} was issued to another client")
        return claims

    def _exchange_code(self, form: dict[str, str], now: float, generation: Callable[[str], int]) -> bytes:
        claims = self._presented(form, "code", ROLE_OAUTH_CODE, "code", now)
        redirect_uri = form.get("redirect_uri")
        if claims.get("rdg") and redirect_uri is None:
            raise OAuthError(INVALID_REQUEST, "redirect_uri is missing: the authorization request had one")
        if redirect_uri is not None and redirect_uri != claims.get("rdr"):
            raise OAuthError(INVALID_GRANT, "redirect_uri is not the one of the authorization request")
        resource = form.get("resource")
        if resource is not None and resource != claims.get("aud"):
            raise OAuthError(INVALID_TARGET, "resource is not the one the code was issued for")
        verifier = form.get("code_verifier")
        if verifier is None:
            raise OAuthError(INVALID_REQUEST, "code_verifier is missing: PKCE (RFC 7636) is required")
        if _VERIFIER.fullmatch(verifier) is None:
            raise OAuthError(INVALID_REQUEST, "code_verifier is not 43-128 characters of A-Z a-z 0-9 - . _ ~")
        if not pkce_matches(verifier, claims.get("pkce", "")):
            raise OAuthError(INVALID_GRANT, "code_verifier does not match the code_challenge")
        app_id, grant = claims["sub"], claims["grant"]
        if claims.get("gen") != generation(app_id):
            raise OAuthError(INVALID_GRANT, "the app's agent tokens were revoked since the code was issued")
        if self.revoked_grants.seen(grant, now):
            raise OAuthError(
                INVALID_GRANT, "the code's grant was ended: a code or refresh token of it was replayed"
            )
        # Only a request that passed every other check uses the code up: a client that sends
        # a stolen code with a wrong verifier cannot burn the rightful client's.
        if not self.used_codes.add(claims["jti"], claims["exp"], now):
            self.revoked_grants.add(grant, claims["auth_time"] + GRANT_SECONDS, now)
            raise OAuthError(INVALID_GRANT, "the code was used already")
        return self._tokens(claims, now)

    def _refresh(self, form: dict[str, str], now: float, generation: Callable[[str], int]) -> bytes:
        claims = self._presented(form, "refresh_token", ROLE_OAUTH_REFRESH, "refresh token", now)
        resource = form.get("resource")
        if resource is not None and resource != claims.get("aud"):
            raise OAuthError(INVALID_TARGET, "resource is not the one the refresh token was issued for")
        scope = form.get("scope")
        if scope is not None:
            granted = set((claims.get("scope") or "").split())
            if _SCOPE.fullmatch(scope) is None or not set(scope.split()) <= granted:
                raise OAuthError(INVALID_SCOPE, "scope asks for more than the grant has")
        app_id, grant = claims["sub"], claims["grant"]
        if claims.get("gen") != generation(app_id):
            raise OAuthError(INVALID_GRANT, "the app's agent tokens were revoked: authorize again")
        if self.revoked_grants.seen(grant, now):
            raise OAuthError(INVALID_GRANT, "the grant was ended: a code or refresh token of it was replayed")
        if not self.used_refresh_tokens.add(claims["jti"], claims["exp"], now):
            # A rotated refresh token came back: one of its two holders is not the client.
            self.revoked_grants.add(grant, claims["auth_time"] + GRANT_SECONDS, now)
            raise OAuthError(INVALID_GRANT, "the refresh token was used already: the grant is ended")
        return self._tokens(claims, now)

    def _tokens(self, grant: dict, now: float) -> bytes:
        """An access token and a new refresh token for the grant a code or refresh token carried."""
        app_id = grant["sub"]
        tools = grant.get("tools")
        access: dict[str, object] = {
            "sub": app_id,
            "role": ROLE_AGENT,
            "aud": grant["aud"],
            "iat": int(now),
            "exp": int(now + ACCESS_SECONDS),
            "gen": grant["gen"],
        }
        if tools is not None:  # checked when the code was issued
            access["tools"] = tools
        refresh: dict[str, object] = {
            "role": ROLE_OAUTH_REFRESH,
            "jti": self._new_id(),
            "iat": int(now),
            "exp": int(min(now + REFRESH_SECONDS, grant["auth_time"] + GRANT_SECONDS)),
            "sub": app_id,
            "aud": grant["aud"],
            "cid": grant["cid"],
            "gen": grant["gen"],
            "grant": grant["grant"],
            "auth_time": grant["auth_time"],
        }
        for name in ("scope", "tools"):
            if name in grant:
                refresh[name] = grant[name]
        response: dict[str, object] = {
            "access_token": sign_claims(self._signing, access),
            "token_type": "Bearer",
            "expires_in": ACCESS_SECONDS,
        }
        if refresh["exp"] > now:  # type: ignore[operator]
            response["refresh_token"] = sign_claims(self._signing, refresh)
        if "scope" in grant:
            response["scope"] = grant["scope"]
        return _encode_json(response)

    # -- the resource's side: which access tokens /apps/<id>/mcp takes -----------------------

    def audience(self, token: bytes) -> object:
        """The `aud` claim of an agent token that verified already (None when it has none or is not JSON)."""
        try:
            payload = token.split(b".")[1]
            claims = _decode_json(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
        except (IndexError, ValueError, msgspec.DecodeError):
            return None
        return claims.get("aud") if type(claims) is dict else None
