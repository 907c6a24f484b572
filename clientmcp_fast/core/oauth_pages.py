"""The consent page and the authorization endpoint's notices: HTML and CSS, no script (docs/oauth.md, The consent page).

Pure rendering: every value shown is escaped here, and every page is answered with the
headers of `page_headers` (never cached, never framed, nothing loaded but its own style).
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

CONSENT_COOKIE = "clientmcp-consent"
# The `__Host-` prefix (RFC 6265bis §4.1.3.2) pins the cookie to this origin and path /, but
# needs Secure, which a browser sets only over https.
CONSENT_COOKIE_SECURE = "__Host-" + CONSENT_COOKIE
CODE_INPUT_MAX = 16

_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;margin:0;padding:1rem;background:#f4f4f5;color:#18181b}"
    "main{max-width:28rem;margin:2rem auto;background:#fff;border-radius:.75rem;padding:1.5rem;"
    "box-shadow:0 1px 3px #0002}"
    "h1{font-size:1.25rem;margin:0 0 1rem}"
    "p{margin:0 0 1rem}"
    "b{word-break:break-all}"
    "label{display:block;font-weight:600;margin-bottom:.25rem}"
    "input[name=code]{box-sizing:border-box;width:100%;font:inherit;font-size:1.5rem;letter-spacing:.2em;"
    "padding:.5rem;border:2px solid #71717a;border-radius:.5rem;text-transform:uppercase}"
    "button{margin-top:1rem;width:100%;font:inherit;font-weight:600;padding:.75rem;border:0;"
    "border-radius:.5rem;background:#1d4ed8;color:#fff}"
    ".problem{color:#b91c1c;font-weight:600}"
    ".small{font-size:.875rem;color:#52525b}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()


def page_headers(form_target: str | None = None) -> list[tuple[bytes, bytes]]:
    """The headers of every page of the authorization endpoint.

    Never stored (`no-store`: it holds a request's state), never framed (clickjacking a
    consent), no referrer sent on (the URL holds the request), and a Content Security Policy
    that allows the page's own style and nothing else: no script, no image, no font. A form's
    answer redirects to the client, so `form_target` (the redirect URI's origin, from
    `form_source`) joins 'self' in form-action, which browsers apply to redirects too.
    """
    form_action = "'self'" + (f" {form_target}" if form_target else "")
    policy = (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action {form_action}; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    return [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"cache-control", b"no-store"),
        (b"pragma", b"no-cache"),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
        (b"content-security-policy", policy.encode("ascii")),
    ]


def form_source(redirect_origin: str) -> str:
    """The CSP source that allows a redirect to `redirect_origin` (core/oauth.py's `redirect_origin`).

    `scheme:` stays as it is; `http://127.0.0.1:PORT` and `http://[::1]:PORT` allow any port,
    as the redirect URI does (RFC 8252 §7.3).
    """
    for loopback in ("http://127.0.0.1", "http://[::1]"):
        if redirect_origin == loopback or redirect_origin.startswith(loopback + ":"):
            return loopback + ":*"
    return redirect_origin


def cookie_header(value: str, secure: bool) -> tuple[bytes, bytes]:
    """The Set-Cookie of the consent cookie: this origin only, never sent by another site's form or script."""
    name = CONSENT_COOKIE_SECURE if secure else CONSENT_COOKIE
    attributes = "Path=/; HttpOnly; SameSite=Strict; Max-Age=600" + ("; Secure" if secure else "")
    return (b"set-cookie", f"{name}={value}; {attributes}".encode("ascii"))


def cookie_value(cookie_header_value: bytes | None, secure: bool) -> str | None:
    """The consent cookie's value in a request's Cookie header, or None."""
    if not cookie_header_value:
        return None
    name = CONSENT_COOKIE_SECURE if secure else CONSENT_COOKIE
    for pair in cookie_header_value.decode("latin-1").split(";"):
        key, _, value = pair.strip().partition("=")
        if key == name:
            return value
    return None


def _page(title: str, body: str) -> bytes:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    ).encode("utf-8")


def _client_label(client_name: str | None, client_site: str | None) -> str:
    label = f"<b>{escape(client_name)}</b>" if client_name else "A client that gave no name"
    if client_site is not None:
        # A client known by its document's URL: the host it publishes from, which no other can claim.
        label += f", described at <b>{escape(client_site)}</b>,"
    return label


def consent_page(
    *,
    action: str,
    app_id: str,
    client_name: str | None,
    redirect_origin: str,
    request: str,
    csrf: str,
    problem: str | None = None,
    client_site: str | None = None,
) -> bytes:
    """The consent page: names the client, where it returns and the app; one form, one text input `code`.

    `request` is the signed authorization request (core/oauth.py, `pending`) and `csrf` its
    CSRF token, both hidden; `problem` says what went wrong with the last code typed.
    `client_site` is where a client known by its metadata document's URL publishes it.
    """
    app = escape(app_id)
    problem_line = f'<p class="problem">{escape(problem)}</p>\n' if problem else ""
    body = (
        f"<h1>Connect to {app}?</h1>\n"
        f"<p>{_client_label(client_name, client_site)} asks to use the tools of <b>{app}</b>. "
        f"When it is done, this page returns to <b>{escape(redirect_origin)}</b>.</p>\n"
        f"<p><b>{app}</b> shows you a code of 8 characters with the same request. "
        "Type it here to allow; if you did not start this, or the names differ, close this page.</p>\n"
        f"{problem_line}"
        f'<form method="post" action="{escape(action)}">\n'
        f'<input type="hidden" name="request" value="{escape(request)}">\n'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">\n'
        f'<label for="code">Code shown by {app}</label>\n'
        f'<input id="code" name="code" type="text" required autofocus autocomplete="off" '
        f'autocapitalize="characters" spellcheck="false" maxlength="{CODE_INPUT_MAX}">\n'
        '<button type="submit">Allow</button>\n'
        "</form>\n"
        '<p class="small">The code proves you are the person using the app; the app asks you too.</p>'
    )
    return _page(f"Connect to {app_id}?", body)


def notice_page(title: str, text: str, link: tuple[str, str] | None = None) -> bytes:
    """A page that tells the person why the request cannot go on; `link` is (href, words): back to the client."""
    body = f"<h1>{escape(title)}</h1>\n<p>{escape(text)}</p>"
    if link is not None:
        href, words = link
        body += f'\n<p><a href="{escape(href)}">{escape(words)}</a></p>'
    return _page(title, body)
