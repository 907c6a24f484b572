"""The OAuth endpoints on the bridge's port, with `--oauth on` (docs/oauth.md).

What each answer says is core/oauth.py's and core/oauth_pages.py's; this module reads the
request, the wall clock and the randomness, answers, counts each refusal for the metrics
and logs it in one line. Nothing here is reached by a request to `/mcp`: the HTTP
protocol hands over only the paths it does not serve itself (net/http.py, `_dispatch`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import time
from typing import TYPE_CHECKING

from clientmcp_fast._pure.routing import origin_form
from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.agent_checks import cors_headers, origin_allowed, parse_bearer
from clientmcp_fast.core.consent import ENDED, MAX_ATTEMPTS, NOT_CONNECTED, Consent, new_code
from clientmcp_fast.core.http import (
    AUTHORIZATION,
    JSON_ONLY,
    KNOWN_INDEX,
    ORIGIN,
    TEXT_PLAIN,
    Exchange,
    Headers,
)
from clientmcp_fast.core.jsonrpc import INVALID_REQUEST, NULL_ID
from clientmcp_fast.core.oauth import (
    ACCESS_DENIED,
    TEMPORARILY_UNAVAILABLE,
    AuthorizationServer,
    AuthorizeRefusal,
    AuthorizeRequest,
    Client,
    OAuthError,
    RequestExpired,
    parse_parameters,
    redirect_origin,
)
from clientmcp_fast.core.oauth import INVALID_REQUEST as OAUTH_INVALID_REQUEST
from clientmcp_fast.core.oauth_pages import (
    consent_page,
    cookie_header,
    cookie_value,
    form_source,
    notice_page,
    page_headers,
)
from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN, ROLE_AGENT, TokenError
from clientmcp_fast.net.client_documents import ClientDocuments

if TYPE_CHECKING:
    from clientmcp_fast.net.server import Server

# A resource's refusal (RFC 6750 §3.1); the endpoints' are core/oauth.py's ERRORS.
INVALID_TOKEN = "invalid_token"
# A client that is refused again and again gets a line per endpoint and error every 10 s,
# the refusals between counted in the next (every one is in the metric).
REFUSAL_LINE_EVERY_SECONDS = 10.0
# How long a right code's form waits for the app's answer before the page asks to try again.
FORM_WAITS_SECONDS = 30.0
_COOKIE = re.compile(r"[A-Za-z0-9_-]{22}")  # the value new_cookie gives

_NO_STORE = ((b"cache-control", b"no-store"), (b"pragma", b"no-cache"))
# Browser-based clients read the metadata and call the registration and token endpoints from
# their own origin; no cookie or other ambient credential is involved, so any origin may.
_ANY_ORIGIN = (b"access-control-allow-origin", b"*")
_JSON_ANY_ORIGIN = (*JSON_ONLY, _ANY_ORIGIN)
_JSON_NO_STORE = (*JSON_ONLY, *_NO_STORE, _ANY_ORIGIN)
_PREFLIGHT = (
    _ANY_ORIGIN,
    (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
    (b"access-control-allow-headers", b"Content-Type, Authorization, MCP-Protocol-Version"),
    (b"access-control-max-age", b"86400"),
)
_WELL_KNOWN_AS = b"/.well-known/oauth-authorization-server"
_WELL_KNOWN_RESOURCE = b"/.well-known/oauth-protected-resource/apps/"
CONTENT_TYPE = KNOWN_INDEX[b"content-type"]
_FORM = b"application/x-www-form-urlencoded"
_APPLICATION_JSON = b"application/json"


def _media_type(value: bytes | None) -> bytes:
    """A Content-Type's media type, lower-cased, without its parameters."""
    return (value or b"").split(b";", 1)[0].strip().lower()


def _app_of_path(path: bytes, prefix: bytes) -> str | None:
    """The client ID in `<prefix><client-id>/mcp`, or None."""
    if not path.startswith(prefix) or not path.endswith(b"/mcp"):
        return None
    app_id = path[len(prefix) : -4].decode("latin-1")
    return app_id if CLIENT_ID_PATTERN.fullmatch(app_id) else None


def _posted(exchange: Exchange) -> bool:
    """Whether a request to a POST-only endpoint was POSTed; a preflight or another method is answered here."""
    method = exchange.request.method
    if method == b"OPTIONS":
        exchange.respond(204, _PREFLIGHT, b"")
        return False
    if method != b"POST":
        exchange.respond(405, (TEXT_PLAIN, (b"allow", b"POST, OPTIONS")), b"use POST\n")
        return False
    return True


class OAuthEndpoints:
    """The authorization server's endpoints and the apps' resources on the public port."""

    def __init__(self, server: Server) -> None:
        settings = server.settings
        public_url = settings.public_url
        assert public_url is not None  # config.load refuses OAuth on without it
        self.server = server
        documents = settings.oauth_client_documents
        self.authorization = AuthorizationServer(
            public_url, settings.secrets, settings.signing_secret, os.urandom, client_documents=documents
        )
        # Clients known by the URL of their metadata document (docs/oauth.md, Decisions).
        self.documents: ClientDocuments | None = ClientDocuments(server.loop) if documents else None
        self._reading: set[asyncio.Task[None]] = set()  # authorization requests waiting for a document
        self.secure = public_url.startswith("https://")
        self.refusals: dict[tuple[str, str], int] = {}  # by endpoint and error
        self.clients_registered = 0
        self.codes_issued = 0  # authorization responses with a code: both the app and its person said yes
        self._next_line_at: dict[tuple[str, str], float] = {}
        self._not_logged: dict[tuple[str, str], int] = {}

    # -- dispatch ----------------------------------------------------------------------------

    def handle(self, exchange: Exchange, now: float) -> bool:
        """Answer a request to a path of OAuth; False when the path is none of them (then 404)."""
        target = exchange.request.target
        path, _, query = origin_form(target).partition(b"?")
        if path.startswith(b"/apps/"):
            app_id = _app_of_path(path, b"/apps/")
            if app_id is None:
                return False
            self._resource(exchange, app_id, now)
        elif path.startswith(b"/.well-known/"):
            self._well_known(exchange, path)
        elif path == b"/oauth/token":
            self._token(exchange, now)
        elif path == b"/oauth/register":
            self._register(exchange, now)
        elif path == b"/oauth/authorize":
            self._authorize(exchange, query, now)
        else:
            return False
        return True

    # -- refusals: a metric and a line each --------------------------------------------------

    def refused(self, endpoint: str, error: str, reason: str, now: float, **fields: object) -> None:
        """Count a refusal and log it: one line per endpoint and error every 10 s at most."""
        key = (endpoint, error)
        self.refusals[key] = self.refusals.get(key, 0) + 1
        if now < self._next_line_at.get(key, -math.inf):
            self._not_logged[key] = self._not_logged.get(key, 0) + 1
            return
        self._next_line_at[key] = now + REFUSAL_LINE_EVERY_SECONDS
        not_logged = self._not_logged.pop(key, 0)
        self.server.events.io_event(
            logging.INFO,
            "oauth_refused",
            endpoint=endpoint,
            error=error,
            reason=reason,
            **fields,
            not_logged=not_logged,
        )

    # -- metadata (RFC 8414, RFC 9728) -------------------------------------------------------

    def _well_known(self, exchange: Exchange, path: bytes) -> None:
        method = exchange.request.method
        if method == b"OPTIONS":
            exchange.respond(204, _PREFLIGHT, b"")
            return
        if path == _WELL_KNOWN_AS:
            body = self.authorization.metadata
        else:
            app_id = _app_of_path(path, _WELL_KNOWN_RESOURCE)
            if app_id is None:
                # The bridge is no OpenID provider, and /mcp is no OAuth resource: only the apps are.
                exchange.respond(404, (TEXT_PLAIN,), b"not found: no metadata at this path\n")
                return
            body = self.authorization.resource_metadata(app_id)
        if method != b"GET" and method != b"HEAD":
            exchange.respond(405, (TEXT_PLAIN, (b"allow", b"GET, HEAD, OPTIONS")), b"use GET\n")
            return
        exchange.respond(200, _JSON_ANY_ORIGIN, body)

    # -- registration (RFC 7591) -------------------------------------------------------------

    def _register(self, exchange: Exchange, now: float) -> None:
        request = exchange.request
        if not _posted(exchange):
            return
        try:
            if _media_type(request.header(CONTENT_TYPE)) != _APPLICATION_JSON:
                raise OAuthError(
                    "invalid_client_metadata", "the registration must be sent as application/json"
                )
            body = request.body
            if body is None:
                raise OAuthError("invalid_client_metadata", "the registration is larger than 16384 bytes")
            answer = self.authorization.register(body, time.time())
        except OAuthError as error:
            self._refuse_json(exchange, "register", error, now)
            return
        self.clients_registered += 1
        exchange.respond(201, _JSON_NO_STORE, answer)

    # -- the token endpoint (RFC 6749 §3.2, §5) ----------------------------------------------

    def _token(self, exchange: Exchange, now: float) -> None:
        request = exchange.request
        if not _posted(exchange):
            return
        tables = self.server.verifier.generations
        agents = tables[ROLE_AGENT] if tables is not None else {}
        try:
            if _media_type(request.header(CONTENT_TYPE)) != _FORM:
                raise OAuthError(OAUTH_INVALID_REQUEST, "the body must be application/x-www-form-urlencoded")
            body = request.body
            if body is None:
                raise OAuthError(OAUTH_INVALID_REQUEST, "the body is larger than 16384 bytes")
            answer = self.authorization.token(body, time.time(), lambda app_id: agents.get(app_id, 0))
        except OAuthError as error:
            self._refuse_json(exchange, "token", error, now)
            return
        exchange.respond(200, _JSON_NO_STORE, answer)

    def _refuse_json(self, exchange: Exchange, endpoint: str, error: OAuthError, now: float) -> None:
        """The error body of RFC 6749 §5.2 (RFC 7591 §3.2.2), never stored, and the refusal counted."""
        self.refused(endpoint, error.error, error.description, now)
        exchange.respond(error.status, _JSON_NO_STORE, error.body())

    # -- the authorization endpoint (RFC 6749 §4.1.1) ----------------------------------------

    def _authorize(self, exchange: Exchange, query: bytes, now: float) -> None:
        request = exchange.request
        if request.method == b"POST":
            self._consent_form(exchange, now)
            return
        if request.method != b"GET" and request.method != b"HEAD":
            exchange.respond(
                405, (TEXT_PLAIN, (b"allow", b"GET, POST")), b"use GET, or POST the consent form\n"
            )
            return
        try:
            url = self.authorization.document_to_read(query)
        except AuthorizeRefusal as refusal:
            self._refuse_authorize(exchange, refusal, now)
            return
        document = None
        if url is not None:
            assert self.documents is not None  # document_to_read names none without them
            document = self.documents.kept(url, self.server.loop.time())
            if document is None:
                self._read_document(exchange, query, url)
                return
        self._authorize_with(exchange, query, document, now)

    def _authorize_with(self, exchange: Exchange, query: bytes, document: Client | None, now: float) -> None:
        """Check the request, its client known (`document`: read from its metadata document), then ask for consent."""
        try:
            pending = self.authorization.authorize_request(query, document)
        except AuthorizeRefusal as refusal:
            self._refuse_authorize(exchange, refusal, now)
            return
        self._consent_page(exchange, pending, now)

    def _refuse_authorize(self, exchange: Exchange, refusal: AuthorizeRefusal, now: float) -> None:
        """A refused authorization request: shown to the person, or redirected to a client known to be good."""
        self.refused("authorize", refusal.error, refusal.description, now)
        if refusal.redirect is None:
            self._page(exchange, 400, "This request cannot go on", refusal.description)
        else:
            exchange.respond(302, [(b"location", refusal.redirect.encode("ascii")), *_NO_STORE], b"")

    def _read_document(self, exchange: Exchange, query: bytes, url: str) -> None:
        """The request's client is known by a URL not read yet: its answer waits for the document, the loop never."""
        documents = self.documents
        assert documents is not None
        loop = self.server.loop

        async def read() -> None:
            try:
                client = await documents.client(url)
            except OAuthError as error:
                exchange.on_abandon = None
                if error.error == TEMPORARILY_UNAVAILABLE:
                    self.refused("authorize", error.error, error.description, loop.time())
                    self._page(exchange, 503, "Try again in a moment", error.description)
                else:
                    self._refuse_authorize(
                        exchange, AuthorizeRefusal(error.error, error.description, None), loop.time()
                    )
                return
            exchange.on_abandon = None
            self._authorize_with(exchange, query, client, loop.time())

        task = loop.create_task(read())
        self._reading.add(task)
        task.add_done_callback(self._reading.discard)
        # The browser went away: its request stops waiting; the fetch goes on for any other.
        exchange.on_abandon = lambda now: task.cancel()

    def _consent_page(self, exchange: Exchange, request: AuthorizeRequest, now: float) -> None:
        """Ask the app and show the page: the app is sent `authorize` with the code the person types here."""
        app_id = request.app_id
        app = self.server.bridge.apps.get(app_id)
        if exchange.request.method == b"HEAD":
            # A HEAD shows nothing to anyone: no app is asked for it.
            exchange.respond(200, page_headers(), b"")
            return
        if app is None:
            self._cannot_consent(exchange, request, NOT_CONNECTED, now)
            return
        signed = self.authorization.pending(request, time.time())  # gives the request its id
        consents = self.server.bridge.consents
        consent = consents.open(request, app, new_code(os.urandom), now)
        if consent is None:
            self.refused("authorize", ACCESS_DENIED, "too many requests wait for the app", now, app=app_id)
            back = self.authorization.denied(request, "too many requests wait for the app's answer")
            self._page(
                exchange,
                429,
                f"{app_id} has too many requests waiting",
                f"{consents.max_per_app} requests wait for {app_id}'s answer already. Answer or let them "
                "end (10 minutes), then start again from the client.",
                (back, f"Return to {redirect_origin(request.redirect_uri)}"),
            )
            return
        origin = redirect_origin(request.redirect_uri)
        problem = app.ask_consent(request.id, request.client_name, origin, consent.code)
        if problem is not None:
            consents.end(consent)
            self._cannot_consent(exchange, request, problem, now)
            return
        cookie = cookie_value(exchange.request.headers.get(b"cookie"), self.secure)
        if cookie is None or _COOKIE.fullmatch(cookie) is None:
            cookie = self.authorization.new_cookie()
        self._show(exchange, 200, request, signed, cookie, None)

    def _show(
        self,
        exchange: Exchange,
        status: int,
        request: AuthorizeRequest,
        signed: str,
        cookie: str,
        problem: str | None,
    ) -> None:
        origin = redirect_origin(request.redirect_uri)
        headers = [*page_headers(form_source(origin)), cookie_header(cookie, self.secure)]
        body = consent_page(
            action=self.authorization.authorization_endpoint,
            app_id=request.app_id,
            client_name=request.client_name,
            redirect_origin=origin,
            request=signed,
            csrf=self.authorization.csrf_token(cookie, request.id),
            problem=problem,
            client_site=request.client_site,
        )
        exchange.respond(status, headers, body)

    def _consent_form(self, exchange: Exchange, now: float) -> None:
        """The consent page's form came back: its request, its CSRF token, the code typed."""
        request = exchange.request
        origin = request.header(ORIGIN)
        expired: RequestExpired | None = None
        try:
            if _media_type(request.header(CONTENT_TYPE)) != _FORM or request.body is None:
                raise OAuthError(OAUTH_INVALID_REQUEST, "the consent form was not sent as a form")
            form = parse_parameters(request.body, "form")
            signed = form.get("request", "")
            try:
                pending = self.authorization.read_pending(signed, time.time())
            except RequestExpired as refusal:
                expired, pending = refusal, refusal.request
        except OAuthError as error:
            self.refused("authorize", error.error, error.description, now)
            self._page(
                exchange,
                400,
                "This request cannot go on",
                f"{error.description}: start again from the client.",
            )
            return
        cookie = cookie_value(request.headers.get(b"cookie"), self.secure)
        if (origin is not None and origin.decode("latin-1") != self.authorization.issuer) or not (
            self.authorization.csrf_matches(cookie, pending.id, form.get("csrf"))
        ):
            # Another site's form, or this one replayed without the browser's cookie (docs/oauth.md).
            self.refused(
                "authorize", OAUTH_INVALID_REQUEST, "the consent form's CSRF token does not match", now
            )
            self._page(
                exchange,
                403,
                "This form was not sent from its page",
                "The bridge did not serve this form to this browser: start again from the client.",
            )
            return
        assert cookie is not None  # csrf_matches needs one
        consents = self.server.bridge.consents
        consent = consents.get(pending.id, now)
        if expired is not None:
            if consent is not None:
                consents.end(consent)
            self._deny(exchange, pending, expired.description, now)
            return
        if consent is None:
            # Ended already (answered, refused), or shown by another instance or before a restart.
            self.refused(
                "authorize", ACCESS_DENIED, "the request is not waiting here", now, app=pending.app_id
            )
            back = self.authorization.denied(pending, "the request is no longer waiting for consent")
            self._page(
                exchange,
                400,
                "This request is no longer waiting",
                "It was answered or refused already, or this bridge no longer knows it: start again from "
                "the client.",
                (back, f"Return to {redirect_origin(pending.redirect_uri)}"),
            )
            return
        if consent.problem is not None:  # told by the app's instance (docs/scaling.md)
            consents.end(consent)
            self._cannot_consent(exchange, pending, consent.problem, now)
            return
        if consent.allow is False:
            consents.end(consent)
            self._deny(exchange, pending, f"the user of {pending.app_id} refused", now)
            return
        if not consent.code_is(form.get("code", "")):
            if consent.wrong_code() == ENDED:
                consents.end(consent)
                self._deny(exchange, pending, f"a wrong code was typed {MAX_ATTEMPTS} times", now)
                return
            left = MAX_ATTEMPTS - consent.attempts
            problem = f"That is not the code {pending.app_id} shows: {left} attempt{'s' * (left > 1)} left."
            self._show(exchange, 400, pending, signed, cookie, problem)
            return
        if consent.allow:
            consents.end(consent)
            self._grant(exchange, pending)
            return
        if self.server.bridge.apps.get(pending.app_id) is not consent.app:
            consents.end(consent)
            self._deny(exchange, pending, f"{pending.app_id} went away before it answered", now)
            return
        self._wait_for_app(exchange, consent, signed, cookie, now)

    def _wait_for_app(
        self, exchange: Exchange, consent: Consent, signed: str, cookie: str, now: float
    ) -> None:
        """The code is right and the app has not answered: the form's answer waits for it, a while."""
        loop = self.server.loop
        pending = consent.request

        def answered(consent: Consent) -> None:
            timer.cancel()
            exchange.on_abandon = None
            self.server.bridge.consents.end(consent)
            if consent.allow:
                self._grant(exchange, pending)
            elif consent.problem is not None:
                self._cannot_consent(exchange, pending, consent.problem, self.server.loop.time())
            else:
                self._deny(
                    exchange, pending, f"the user of {pending.app_id} refused", self.server.loop.time()
                )

        def waited() -> None:
            # A form sent again meanwhile waits in this one's place: this one is answered anyway.
            if consent.waiter is answered:
                consent.waiter = None
            exchange.on_abandon = None
            problem = (
                f"The code is right. {pending.app_id} has not answered yet: allow the request there, then "
                "type the code again."
            )
            self._show(exchange, 200, pending, signed, cookie, problem)

        def abandoned(now: float) -> None:
            timer.cancel()
            if consent.waiter is answered:
                consent.waiter = None

        consent.waiter = answered
        exchange.on_abandon = abandoned
        timer = loop.call_later(FORM_WAITS_SECONDS, waited)

    def _grant(self, exchange: Exchange, pending: AuthorizeRequest) -> None:
        """Both said yes: the code for the client, by the redirect of RFC 6749 §4.1.2 with `state` and `iss`."""
        tables = self.server.verifier.generations
        gen = tables[ROLE_AGENT].get(pending.app_id, 0) if tables is not None else 0
        code = self.authorization.issue_code(pending, time.time(), gen)
        self.codes_issued += 1
        location = self.authorization.authorization_response(pending, code)
        exchange.respond(303, [(b"location", location.encode("ascii")), *page_headers()], b"")

    def _deny(self, exchange: Exchange, pending: AuthorizeRequest, reason: str, now: float) -> None:
        """The request ended without consent: its client hears `access_denied`, with `state` and `iss`."""
        self.refused("authorize", ACCESS_DENIED, reason, now, app=pending.app_id)
        location = self.authorization.denied(pending, reason)
        exchange.respond(303, [(b"location", location.encode("ascii")), *page_headers()], b"")

    def _cannot_consent(self, exchange: Exchange, pending: AuthorizeRequest, why: str, now: float) -> None:
        """The app cannot be asked: say so, and offer the way back (docs/oauth.md)."""
        self.refused(
            "authorize", ACCESS_DENIED, "the app cannot be asked for consent", now, app=pending.app_id
        )
        back = self.authorization.denied(pending, "the app cannot be asked for consent")
        self._page(
            exchange,
            403,
            f"{pending.app_id} cannot be asked",
            f"{pending.app_id} cannot be authorized this way: {why}. Only its user can let a client in.",
            (back, f"Return to {redirect_origin(pending.redirect_uri)}"),
        )

    def _page(self, exchange: Exchange, status: int, title: str, text: str, link=None) -> None:
        exchange.respond(status, page_headers(), notice_page(title, text, link))

    # -- the apps' resources: /apps/<client-id>/mcp ------------------------------------------

    def _resource(self, exchange: Exchange, app_id: str, now: float) -> None:
        """Answer a request to an app's resource that the agent endpoint's `handle_resource` did not serve.

        A preflight and a refused Origin are answered as on `/mcp`; every other request here lacks
        an access token for this resource: 401 with the challenge of RFC 6750 §3 (docs/oauth.md).
        """
        request = exchange.request
        agents = self.server.agents
        origin = request.header(ORIGIN)
        cors: Headers = ()
        if origin is not None:
            if not origin_allowed(agents.allowed_origins, origin):
                agents.handle(exchange, b"", now)  # its 403, as on /mcp
                return
            cors = cors_headers(origin)
        if request.method == b"OPTIONS":
            agents.handle(exchange, b"", now)  # a preflight needs no token
            return
        authorization = request.header(AUTHORIZATION)
        token = None if authorization is None else parse_bearer(authorization)
        if token is None:
            # RFC 6750 §3.1: no credential at all gets the challenge without an error code.
            self._unauthorized(
                exchange, app_id, cors, "no access token: send Authorization: Bearer <token>", False
            )
            return
        try:
            grant = self.server.verifier.grant(token, ROLE_AGENT, now)
        except TokenError as error:
            self._unauthorized(exchange, app_id, cors, str(error), True, now)
            return
        # A valid token the agent endpoint did not take is another app's, or its aud another
        # resource's (Grant.resource, core/tokens.py).
        if grant.client_id != app_id:
            problem = "the token is for another app"
        else:
            problem = "the token's audience (aud) is not this resource"
        self._unauthorized(exchange, app_id, cors, problem, True, now)

    def _unauthorized(
        self, exchange: Exchange, app_id: str, cors: Headers, problem: str, invalid: bool, now: float = 0.0
    ) -> None:
        if invalid:
            self.refused("resource", INVALID_TOKEN, problem, now, app=app_id)
        headers = [*JSON_ONLY, *cors, (b"www-authenticate", self.authorization.challenge(app_id, invalid))]
        exchange.respond(401, headers, jsonrpc.error(NULL_ID, INVALID_REQUEST, f"Unauthorized: {problem}"))
