"""The authorization endpoint's pages, rendered without I/O (docs/oauth.md, The consent page).

What the page must be: plain HTML and CSS (no script), readable on a phone, naming the
client, where it returns and the app; one form with one text input `code`, its CSRF token
and the signed request hidden; never cached, never framed. Every value shown is escaped.
"""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser

from clientmcp_fast.core.oauth_pages import (
    CONSENT_COOKIE,
    CONSENT_COOKIE_SECURE,
    consent_page,
    cookie_header,
    cookie_value,
    form_source,
    notice_page,
    page_headers,
)


class Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text, as a browser would read them."""

    def __init__(self, page: bytes) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False
        self.feed(page.decode("utf-8"))

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        else:
            self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attributes for name, attributes in self.tags if name == tag]

    @property
    def words(self) -> str:
        return " ".join("".join(self.text).split())


def page(**overrides) -> bytes:
    values = {
        "action": "/oauth/authorize",
        "app_id": "todo-app",
        "client_name": "Claude",
        "redirect_origin": "https://claude.ai",
        "request": "signed.request.value",
        "csrf": "csrf-token-value",
    }
    values.update(overrides)
    return consent_page(**values)


def test_the_consent_page_names_the_client_where_it_returns_and_the_app():
    words = Elements(page()).words
    assert "Connect to todo-app?" in words
    assert "Claude asks to use the tools of todo-app." in words
    assert "this page returns to https://claude.ai." in words
    assert "todo-app shows you a code of 8 characters" in words


def test_the_consent_page_has_one_form_with_one_text_input_named_code():
    elements = Elements(page())
    (form,) = elements.named("form")
    assert form == {"method": "post", "action": "/oauth/authorize"}
    inputs = elements.named("input")
    visible = [i for i in inputs if i.get("type") != "hidden"]
    assert len(visible) == 1 and visible[0]["name"] == "code" and visible[0]["type"] == "text"
    assert "required" in visible[0] and visible[0]["autocomplete"] == "off"
    hidden = {i["name"]: i["value"] for i in inputs if i.get("type") == "hidden"}
    assert hidden == {"request": "signed.request.value", "csrf": "csrf-token-value"}
    (label,) = elements.named("label")
    assert label["for"] == visible[0]["id"]  # the label reads the input out to a screen reader


def test_the_consent_page_has_no_script_and_is_sized_for_a_phone():
    elements = Elements(page())
    assert not elements.named("script") and not elements.named("iframe") and not elements.named("img")
    for _, attributes in elements.tags:
        assert not any(name.startswith("on") for name in attributes), attributes  # no inline handler
    viewport = [m for m in elements.named("meta") if m.get("name") == "viewport"]
    assert viewport == [{"name": "viewport", "content": "width=device-width, initial-scale=1"}]
    assert "max-width:28rem" in elements.style


def test_a_client_without_a_name_is_said_to_have_none():
    assert (
        "A client that gave no name asks to use the tools of todo-app."
        in Elements(page(client_name=None)).words
    )


def test_a_client_known_by_its_document_is_shown_with_the_site_that_publishes_it():
    """The draft's "OAuth Phishing Attacks": the client ID's host beside its name, which no other client can claim."""
    words = Elements(page(client_site="https://claude.ai")).words
    assert "Claude, described at https://claude.ai, asks to use the tools of todo-app." in words
    assert "described at" not in Elements(page()).words
    hostile = Elements(page(client_name=None, client_site='https://x"><b>y'))
    assert 'A client that gave no name, described at https://x"><b>y, asks' in hostile.words
    assert len(hostile.named("b")) == len(
        Elements(page(client_name=None, client_site="https://x")).named("b")
    )


def test_everything_shown_is_escaped():
    hostile = '<script>alert("x")</script> & "quotes"'
    raw = page(client_name=hostile, request='"><script>x</script>', csrf="'onmouseover='x", app_id="a<b")
    elements = Elements(raw)
    assert not elements.named("script")
    assert hostile in elements.words and "a<b" in elements.words
    hidden = {i["name"]: i["value"] for i in elements.named("input") if i.get("type") == "hidden"}
    assert hidden == {"request": '"><script>x</script>', "csrf": "'onmouseover='x"}
    assert b"<script>" not in raw


def test_a_problem_with_the_last_code_is_shown_above_the_form():
    words = Elements(page(problem="That code is not the one todo-app shows: 4 tries left.")).words
    assert "That code is not the one todo-app shows: 4 tries left." in words


def test_the_pages_are_never_stored_framed_or_allowed_a_script():
    headers = dict(page_headers())
    assert headers[b"content-type"] == b"text/html; charset=utf-8"
    assert headers[b"cache-control"] == b"no-store" and headers[b"pragma"] == b"no-cache"
    assert headers[b"x-frame-options"] == b"DENY"
    # A browser then sends its Origin with the form (no-referrer: `Origin: null`), no Referer elsewhere.
    assert headers[b"referrer-policy"] == b"same-origin"
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in headers[b"content-security-policy"].decode().split(";")
    )
    assert policy["default-src"] == "'none'" and "script-src" not in policy
    assert policy["frame-ancestors"] == "'none'" and policy["base-uri"] == "'none'"
    assert policy["form-action"] == "'self'"
    # The one style the page has is the one the policy allows, by its hash.
    style = Elements(page()).style
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert policy["style-src"] == f"'sha256-{digest}'"


def test_the_form_may_lead_to_the_clients_redirect_and_nowhere_else():
    policy = dict(page_headers("https://claude.ai"))[b"content-security-policy"].decode()
    assert "form-action 'self' https://claude.ai;" in policy
    assert form_source("https://claude.ai") == "https://claude.ai"
    assert form_source("http://127.0.0.1:33418") == "http://127.0.0.1:*"  # any port, as RFC 8252 §7.3
    assert form_source("http://[::1]") == "http://[::1]:*"
    assert form_source("http://localhost:3000") == "http://localhost:3000"
    assert form_source("cursor:") == "cursor:"


def test_the_consent_cookie_is_this_origin_s_alone():
    name, value = cookie_header("abc", secure=True)
    assert name == b"set-cookie"
    assert (
        value
        == f"{CONSENT_COOKIE_SECURE}=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=600; Secure".encode()
    )
    assert cookie_header("abc", secure=False)[1].startswith(
        f"{CONSENT_COOKIE}=abc; Path=/; HttpOnly; SameSite=Strict".encode()
    )
    assert not cookie_header("abc", secure=False)[1].endswith(b"Secure")
    assert cookie_value(b"a=1; __Host-clientmcp-consent=xyz; b=2", secure=True) == "xyz"
    assert (
        cookie_value(b"clientmcp-consent=xyz", secure=True) is None
    )  # not Secure: not the cookie over https
    assert cookie_value(b"clientmcp-consent=xyz", secure=False) == "xyz"
    assert cookie_value(None, secure=False) is None


def test_a_notice_says_why_and_links_back_to_the_client_escaped():
    raw = notice_page(
        "Not allowed", "todo-app cannot be asked.", ('https://c.example/cb?error=a&state="x"', "Back")
    )
    elements = Elements(raw)
    assert "Not allowed todo-app cannot be asked. Back" in elements.words
    (link,) = elements.named("a")
    assert link["href"] == 'https://c.example/cb?error=a&state="x"' and list(link) == ["href"]
