"""A setting the bridge cannot use is one line naming the setting and the rule, exit 2 (docs/configuration.md).

Every integer and duration setting is tried with bad values, from the environment and as a
flag; none may show Python's own words (`invalid literal for int()`, a traceback).
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess

import pytest
from natsserver import NKey, Operator
from test_cli import CLIENTMCP, SECRET_TEXT, assert_one_line_error, environment, free_port, run

from clientmcp_fast.config import OPTIONS, Settings, load
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.net.nkeys import PREFIX_ACCOUNT

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Limits)} | {"port": Settings.port}
# Requests a second (a number, fractions allowed, 0 turning the limit off), not a duration.
RATES = [option for option in OPTIONS if option.name == "agent-rate"]
# Whole numbers for which 0 means "no limit" (docs/configuration.md, Agent limits).
ZERO_MEANS_OFF = {"agent-max-calls"}
INTEGERS = [option for option in OPTIONS if type(_DEFAULTS.get(option.attr)) is int]
DURATIONS = [
    option for option in OPTIONS if type(_DEFAULTS.get(option.attr)) is float and option not in RATES
]
# Words of Python, not of the operator's settings.
INTERNALS = re.compile(r"Traceback|int\(\)|base 10|invalid literal|Error\b|Errno|could not convert")

NOT_WHOLE = "is not a whole number"
POSITIVE = "must be more than zero"
NOT_NEGATIVE = "must not be negative"
TOO_LARGE = "is more than the largest number allowed, 1000000000000"
NOT_DURATION = "is not a duration like 90s, 15m, 24h or 30d"
TOO_LONG = "is more than the largest duration allowed, 3650d"
NOT_RATE = "is not a number of requests a second, such as 1000 or 0.5"
RATE_TOO_SMALL = "is less than the smallest rate allowed, 0.001 (0 turns it off)"


def _integer_cases(option) -> list[tuple[str, str]]:
    if option.name == "port":
        return [("abc", NOT_WHOLE), ("8080.5", NOT_WHOLE), ("-1", "is not a TCP port (0 to 65535)"),
                ("65536", "is not a TCP port (0 to 65535)")]  # fmt: skip
    # max-app-connections: 0 means the open-file limit; the per-token limits: none.
    zero_allowed = _DEFAULTS[option.attr] == 0 or option.name in ZERO_MEANS_OFF
    cases = [("abc", NOT_WHOLE), ("1.5", NOT_WHOLE), ("", NOT_WHOLE), ("10" + "0" * 12, TOO_LARGE)]
    cases.append(("-1", NOT_NEGATIVE if zero_allowed else POSITIVE))
    if not zero_allowed:
        cases.append(("0", POSITIVE))
    return cases


DURATION_CASES = [("soon", NOT_DURATION), ("5x", NOT_DURATION), ("-1", POSITIVE), ("-5m", POSITIVE),
                  ("0", POSITIVE), ("0s", POSITIVE), ("3651d", TOO_LONG)]  # fmt: skip
# The last rate is 0.0 as a float, and still refused: its digits say it is not 0.
RATE_CASES = [("abc", NOT_RATE), ("1e3", NOT_RATE), ("", NOT_RATE), ("-1", NOT_NEGATIVE), ("-0.5", NOT_NEGATIVE),
              ("10" + "0" * 12, TOO_LARGE), ("0.0009", RATE_TOO_SMALL),
              ("0." + "0" * 400 + "1", RATE_TOO_SMALL)]  # fmt: skip
CASES = (
    [(option, value, rule) for option in INTEGERS for value, rule in _integer_cases(option)]
    + [(option, value, rule) for option in DURATIONS for value, rule in DURATION_CASES]
    + [(option, value, rule) for option in RATES for value, rule in RATE_CASES]
)


def _ids(case) -> str:
    option, value, _ = case
    return f"{option.name}={value}"


def assert_setting_error(result: subprocess.CompletedProcess, named: str, value: str, rule: str) -> None:
    """One line, exit 2, of the form `clientmcp: error: NAME: 'VALUE' RULE`, with no Python internals."""
    line = assert_one_line_error(result)
    assert line == f"clientmcp: error: {named}: {value!r} {rule}\n"
    assert not INTERNALS.search(line), line


def test_every_integer_and_duration_setting_is_covered():
    """The cases reach every setting whose default is a number: a new one is tested as it is added."""
    numeric = {option.name for option in OPTIONS if isinstance(_DEFAULTS.get(option.attr), (int, float))}
    assert {option.name for option in INTEGERS + DURATIONS + RATES} == numeric
    assert {"port", "max-tools", "max-app-connections", "call-timeout", "app-idle-timeout"} <= numeric


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bad_value_from_the_environment(case):
    """CLIENTMCP_<NAME>=bad: the variable, the value and the rule, in one line."""
    option, value, rule = case
    result = run("serve", env=environment(CLIENTMCP_SECRET=SECRET_TEXT, **{option.env: value}))
    assert_setting_error(result, option.env, value, rule)


FLAG_CASES = [case for case in CASES if case[1] in ("abc", "soon", "-1", "-5m")]


@pytest.mark.parametrize("case", FLAG_CASES, ids=_ids)
def test_bad_value_of_the_flag(case):
    """--name bad, and --name=bad: the flag, the value and the rule; a value may start with a dash."""
    option, value, rule = case
    assert_setting_error(run("serve", f"--{option.name}", value), f"--{option.name}", value, rule)
    assert_setting_error(run("serve", f"--{option.name}={value}"), f"--{option.name}", value, rule)


@pytest.mark.parametrize("args", [["--ttl", "-5m"], ["--ttl=-5m"]], ids=["space", "equals"])
def test_a_negative_ttl_is_refused_for_being_negative(args):
    """`clientmcp token agent x --ttl -5m` says the ttl must be positive, however it is written."""
    assert_setting_error(run("token", "agent", "x", *args), "--ttl", "-5m", POSITIVE)


@pytest.mark.parametrize(("ttl", "rule"), [("5x", NOT_DURATION), ("0s", POSITIVE), ("3651d", TOO_LONG)])
def test_a_bad_ttl_names_the_rule(ttl, rule):
    assert_setting_error(run("token", "agent", "x", "--ttl", ttl), "--ttl", ttl, rule)


def test_a_dash_value_does_not_swallow_the_next_option():
    """`--ttl --help` is a missing value, not a ttl of `--help`."""
    assert "--ttl: expected one argument" in assert_one_line_error(
        run("token", "agent", "x", "--ttl", "--help")
    )


def test_serve_help_has_the_note_on_secrets():
    """`clientmcp serve --help` says where the secret comes from and why never from a flag."""
    result = run("serve", "--help", env=environment())
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "The secret comes from CLIENTMCP_SECRET (or CLIENTMCP_SECRETS" in text
    assert "never from a flag, since a command line shows in `ps`" in text


def test_a_port_in_use_is_one_line_and_exit_2():
    """A listen address that cannot be bound is a setting to change: one line, exit 2, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--host", "127.0.0.1", "--port", str(port))
    assert assert_one_line_error(result) == (
        f"clientmcp: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )


# The second name has a label over 63 characters, which the idna codec refuses before any
# lookup: the bridge hands uvloop an ASCII host in bytes (net/server.py, listen_hosts).
@pytest.mark.parametrize(
    "host", ["no-such-host.invalid", "a" * 64 + ".invalid"], ids=["unknown", "long-label"]
)
def test_an_address_not_on_this_machine_is_one_line_and_exit_2(host):
    result = run("serve", "--host", host, "--port", "8080")
    line = assert_one_line_error(result)
    assert line.startswith(f"clientmcp: error: cannot listen on {host}:8080: "), line
    assert not INTERNALS.search(line), line


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_an_ipv6_listen_address_is_logged_in_brackets():
    """`listening on [::1]:PORT`, as a URL writes it, rather than `::1:PORT`."""
    port = free_port()
    process = subprocess.Popen(
        [CLIENTMCP, "serve", "--host", "::1", "--port", str(port)],
        env=environment(CLIENTMCP_SECRET=SECRET_TEXT),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stderr.readline()
    finally:
        process.terminate()
        process.wait(10)
        process.stderr.close()
    assert line.rstrip("\n").endswith(f" info listening on [::1]:{port}"), line


@pytest.mark.parametrize("url", ["ws://127.0.0.1:4222", "wss://nats.example:443", "http://127.0.0.1:4222"])
def test_a_nats_url_of_another_scheme_is_refused(url):
    """NATS over WebSocket needs aiohttp, which the bridge does not ship: refused at start, not left to fail later."""
    result = run("serve", env=environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_NATS=url))
    line = assert_one_line_error(result)
    assert "is not a NATS URL (nats://host:port or tls://host:port)" in line and url.split("//")[1] in line


def test_a_nats_creds_file_that_is_missing_or_cannot_be_used_is_refused(tmp_path):
    """CLIENTMCP_NATS_CREDS: a path that is no file, or a file that cannot sign, is one line at start.

    Each fault of the file itself (tests/net/test_nkeys.py has them all) reaches the line.
    """
    base = {"CLIENTMCP_SECRET": SECRET_TEXT, "CLIENTMCP_NATS": "nats://127.0.0.1:4222"}
    missing = tmp_path / "none.creds"
    line = assert_one_line_error(run("serve", env=environment(**base, CLIENTMCP_NATS_CREDS=str(missing))))
    assert line == f"clientmcp: error: CLIENTMCP_NATS_CREDS: {str(missing)!r} is not a file\n"
    good = Operator().account("bridge").creds("bridge-1")
    seed = good.splitlines()[good.splitlines().index("-----BEGIN USER NKEY SEED-----") + 1]
    bad = {
        "-----BEGIN NATS USER JWT-----\n": "it has no -----BEGIN USER NKEY SEED----- block (is it a creds file?)",
        good.replace(seed, seed[:9] + ("A" if seed[9] != "A" else "B") + seed[10:]): (
            "the NKey seed's checksum does not match: a character is wrong or missing"
        ),
        good.replace(
            seed, NKey(PREFIX_ACCOUNT).seed
        ): "its seed is an account's (SA...), not a user's (SU...)",
    }
    creds = tmp_path / "user.creds"
    for text, reason in bad.items():
        creds.write_text(text)
        line = assert_one_line_error(run("serve", env=environment(**base, CLIENTMCP_NATS_CREDS=str(creds))))
        assert line == f"clientmcp: error: CLIENTMCP_NATS_CREDS: {str(creds)!r}: {reason}\n"
    creds.write_text(good)  # no nkeys package needed: the bridge signs by itself (net/nkeys.py)
    assert load(environment(**base, CLIENTMCP_NATS_CREDS=str(creds)), None).nats == (base["CLIENTMCP_NATS"],)


# -- OAuth (docs/oauth.md) ------------------------------------------------------------------------

PUBLIC_URL_EXAMPLE = "an origin like https://bridge.example (http:// only for localhost, 127.0.0.1 or [::1])"


@pytest.mark.parametrize(
    ("given", "kept"),
    [("https://Bridge.Example", "https://bridge.example"), ("https://bridge.example:443/", "https://bridge.example"),
     ("HTTPS://bridge.example:8443", "https://bridge.example:8443"), ("http://localhost:8080", "http://localhost:8080"),
     ("http://127.0.0.1:80", "http://127.0.0.1"), ("http://[::1]:9000", "http://[::1]:9000"),
     ("https://[2001:DB8:0::1]", "https://[2001:db8::1]"), ("  https://xn--bcher-kva.example  ", "https://xn--bcher-kva.example")],
)  # fmt: skip
def test_the_public_url_is_kept_in_one_spelling(given, kept):
    """Clients compare the issuer and resource URLs as strings: one spelling, whatever the operator wrote."""
    env = environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_OAUTH="on", CLIENTMCP_PUBLIC_URL=given)
    settings = load(env)
    assert settings.oauth is True and settings.public_url == kept


def test_oauth_is_off_by_default_and_takes_on_or_off_in_any_case():
    assert load(environment(CLIENTMCP_SECRET=SECRET_TEXT)).oauth is False
    assert load(environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_OAUTH=" OFF ")).oauth is False
    on = environment(
        CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_OAUTH="On", CLIENTMCP_PUBLIC_URL="https://b.example"
    )
    assert load(on).oauth is True


@pytest.mark.parametrize(
    ("value", "rule"),
    [("ftp://bridge.example", f"is not {PUBLIC_URL_EXAMPLE}"),
     ("bridge.example", f"is not {PUBLIC_URL_EXAMPLE}"),
     ("http://bridge.example", f"is http:// on a host other than this machine: it must be {PUBLIC_URL_EXAMPLE}"),
     ("https://bridge.example/mcp", f"has a path, query or fragment: it must be {PUBLIC_URL_EXAMPLE}"),
     ("https://bridge.example?x=1", f"has a path, query or fragment: it must be {PUBLIC_URL_EXAMPLE}"),
     ("https://bridge.example#top", f"has a path, query or fragment: it must be {PUBLIC_URL_EXAMPLE}"),
     ("https://me@bridge.example", f"holds a user name: it must be {PUBLIC_URL_EXAMPLE}"),
     ("https://bridge.example:0", "does not have a TCP port from 1 to 65535"),
     ("https://bridge.example:65536", "does not have a TCP port from 1 to 65535"),
     ("https://bridge.example:", "does not have a TCP port from 1 to 65535"),
     ("https://bridge.example:٣", "does not have a TCP port from 1 to 65535"),
     ("https://brücke.example", "does not name a host (ASCII letters, digits, dots and hyphens; IDNs as xn--)"),
     ("https://-bridge.example", "does not name a host (ASCII letters, digits, dots and hyphens; IDNs as xn--)"),
     ("https://[::g]", "does not hold a valid IPv6 address")],
)  # fmt: skip
def test_a_public_url_that_is_not_an_origin_is_refused(value, rule):
    """From the environment and as a flag: one line naming the setting, the value and the rule."""
    result = run("serve", env=environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_PUBLIC_URL=value))
    assert_setting_error(result, "CLIENTMCP_PUBLIC_URL", value, rule)
    if value.isascii():
        assert_setting_error(run("serve", f"--public-url={value}"), "--public-url", value, rule)


def test_an_oauth_mode_other_than_on_or_off_is_refused():
    result = run("serve", env=environment(CLIENTMCP_SECRET=SECRET_TEXT, CLIENTMCP_OAUTH="yes"))
    assert_setting_error(result, "CLIENTMCP_OAUTH", "yes", "is not one of off, on")
    assert_setting_error(run("serve", "--oauth", "true"), "--oauth", "true", "is not one of off, on")


def test_client_documents_are_on_by_default_and_take_on_or_off_in_any_case():
    """docs/oauth.md, Decisions: with OAuth on, a client may be known by its document's URL unless turned off."""
    on = {
        "CLIENTMCP_SECRET": SECRET_TEXT,
        "CLIENTMCP_OAUTH": "on",
        "CLIENTMCP_PUBLIC_URL": "https://b.example",
    }
    assert load(environment(**on)).oauth_client_documents is True
    assert load(environment(**on, CLIENTMCP_OAUTH_CLIENT_DOCUMENTS=" Off ")).oauth_client_documents is False
    assert load(environment(**on, CLIENTMCP_OAUTH_CLIENT_DOCUMENTS="ON")).oauth_client_documents is True
    result = run("serve", env=environment(**on, CLIENTMCP_OAUTH_CLIENT_DOCUMENTS="no"))
    assert_setting_error(result, "CLIENTMCP_OAUTH_CLIENT_DOCUMENTS", "no", "is not one of off, on")
    flagged = run("serve", "--oauth-client-documents", "1", env=environment(**on))
    assert_setting_error(flagged, "--oauth-client-documents", "1", "is not one of off, on")


def test_oauth_on_without_a_public_url_is_refused():
    """The issuer and resource URLs are built from it: there is no guessing it from a request's Host."""
    line = assert_one_line_error(run("serve", "--oauth", "on"))
    assert line == (
        "clientmcp: error: CLIENTMCP_OAUTH=on needs CLIENTMCP_PUBLIC_URL (or --public-url): the origin agents "
        "reach the bridge at, such as https://bridge.example\n"
    )
