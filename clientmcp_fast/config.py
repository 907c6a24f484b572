"""Settings from the environment and `clientmcp serve` flags (docs/configuration.md).

Every setting has an environment variable `CLIENTMCP_<NAME>` and a flag `--<name>`;
a flag wins over the environment. Secrets come from the environment only, because a
command line shows in `ps`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.tokens import MIN_SECRET_BYTES

LOG_LEVELS = ("error", "warn", "info", "debug")
LOG_FORMATS = ("text", "json")


class ConfigError(Exception):
    """A setting that cannot be used; the message is one line for the operator."""


# The largest values a setting takes: enough for any deployment, and small enough that the
# compiled code's C integers (ssize_t) and the event loop's timers (milliseconds in a uint64)
# hold them with room for the arithmetic done on them.
MAX_WHOLE_NUMBER = 10**12
MAX_DURATION_DAYS = 3650
# The smallest --agent-rate other than 0: a token over a rate waits up to 1 / rate seconds, and
# that wait, its Retry-After, is a C integer in the compiled build; one request every 1,000 s
# keeps it a number an agent can act on.
MIN_AGENT_RATE = 0.001
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in `text`: a number with an optional unit s, m, h or d (`30d`, `90s`, `1.5`)."""
    # A sign is read so that `-1` is refused for being negative, not for not being a duration.
    match = re.fullmatch(r"\s*([-+]?\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 24h or 30d")
    value = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if value <= 0:
        raise ValueError(f"{text!r} must be more than zero")
    if value > MAX_DURATION_DAYS * 86400:
        raise ValueError(f"{text!r} is more than the largest duration allowed, {MAX_DURATION_DAYS}d")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # int()'s own message names int() and base 10, which mean nothing to an operator
        raise ValueError(f"{text!r} is not a whole number") from None


def _whole_number(text: str, *, zero_allowed: bool) -> int:
    value = _integer(text)
    if value < 0 or (value == 0 and not zero_allowed):
        raise ValueError(
            f"{text!r} must not be negative" if zero_allowed else f"{text!r} must be more than zero"
        )
    if value > MAX_WHOLE_NUMBER:
        raise ValueError(f"{text!r} is more than the largest number allowed, {MAX_WHOLE_NUMBER}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, zero_allowed=False)


def _non_negative_int(text: str) -> int:
    return _whole_number(text, zero_allowed=True)


def _rate(text: str) -> float:
    """A number of requests a second: 0 (off), or 0.001 or more, fractions allowed (`0.5`: one every 2 s)."""
    match = re.fullmatch(r"\s*([-+]?\d+(?:\.\d+)?)\s*", text)
    if not match:
        raise ValueError(f"{text!r} is not a number of requests a second, such as 1000 or 0.5")
    value = float(match.group(1))
    if value < 0:
        raise ValueError(f"{text!r} must not be negative")
    # A rate too small for a float reads as 0.0: its digits, not its value, say it is not 0.
    if value < MIN_AGENT_RATE and match.group(1).lstrip("+-").strip("0.") != "":
        raise ValueError(
            f"{text!r} is less than the smallest rate allowed, {MIN_AGENT_RATE} (0 turns it off)"
        )
    if value > MAX_WHOLE_NUMBER:
        raise ValueError(f"{text!r} is more than the largest number allowed, {MAX_WHOLE_NUMBER}")
    return value


def _port(text: str) -> int:
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise ValueError(f"{text!r} is not a TCP port (0 to 65535)")
    return value


def _log_level(text: str) -> str:
    level = text.strip().lower()  # `INFO` and `Warn` are meant as much as `info`
    if level not in LOG_LEVELS:
        raise ValueError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def _log_format(text: str) -> str:
    form = text.strip().lower()
    if form not in LOG_FORMATS:
        raise ValueError(f"{text!r} is not one of {', '.join(LOG_FORMATS)}")
    return form


def _metrics_address(text: str) -> tuple[str, int] | None:
    """`HOST:PORT` (`[::1]:9464` for IPv6) of the metrics listener; an empty value means none."""
    text = text.strip()
    if not text:
        return None
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise ValueError(f"{text!r} is not HOST:PORT, e.g. 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, _port(port)


def _state_path(text: str) -> str | None:
    """A state file's path, or `nats` (the cluster's bucket); an empty value means none (generations off)."""
    return text.strip() or None


# `--state nats`: token generations in the `--nats` cluster's JetStream bucket (net/nats_state.py);
# a file of that name is `--state ./nats`.
STATE_NATS = "nats"
# nats-py's ws:// and wss:// need aiohttp, which the bridge does not ship: refused here, not
# left to fail quietly in the background.
_NATS_SCHEMES = ("nats://", "tls://")


def parse_nats(text: str) -> tuple[str, ...]:
    """NATS server URLs, comma-separated (docs/scaling.md); an empty value means none (one process)."""
    urls = tuple(part.strip() for part in text.split(",") if part.strip())
    for url in urls:
        if not url.startswith(_NATS_SCHEMES):
            raise ValueError(
                f"{url.split('@')[-1]!r} is not a NATS URL (nats://host:port or tls://host:port)"
            )
    return urls


def check_nats_creds(path: str) -> None:
    """ConfigError unless CLIENTMCP_NATS_CREDS names a creds file the bridge can sign with (net/nkeys.py)."""
    if not os.path.isfile(path):
        raise ConfigError(f"CLIENTMCP_NATS_CREDS: {path!r} is not a file")
    from clientmcp_fast.net.nkeys import CredsError, read_creds  # only with a creds file

    try:
        read_creds(path)
    except CredsError as error:
        raise ConfigError(f"CLIENTMCP_NATS_CREDS: {path!r}: {error}") from None


def cores() -> int:
    """The cores this process may run on (its affinity mask, as a container's CPU set limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux: no affinity mask to read
        return os.cpu_count() or 1


OAUTH_MODES = ("off", "on")


def _oauth_mode(text: str) -> bool:
    """`on` or `off`, in any case (docs/oauth.md): --oauth, and --oauth-client-documents within it."""
    mode = text.strip().lower()
    if mode not in OAUTH_MODES:
        raise ValueError(f"{text!r} is not one of {', '.join(OAUTH_MODES)}")
    return mode == "on"


# Where http:// is enough for the public URL: a bridge tried on this machine. Anywhere else
# the authorization server's endpoints need TLS (OAuth 2.1 §1.5), behind a proxy if need be.
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_DNS_NAME = re.compile(
    r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)
_DEFAULT_PORTS = {"https": 443, "http": 80}


def parse_public_url(text: str) -> str | None:
    """The origin agents reach the bridge at (`https://bridge.example`), in its one spelling; empty: none.

    The issuer and every resource URL of OAuth are built from it (docs/oauth.md), and
    clients compare those as strings: scheme and host are lower-cased, a default port and a
    trailing slash dropped. A path, a query, a fragment or a user name is refused.
    """
    text = text.strip()
    if not text:
        return None
    example = "an origin like https://bridge.example (http:// only for localhost, 127.0.0.1 or [::1])"
    scheme, separator, rest = text.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in _DEFAULT_PORTS:
        raise ValueError(f"{text!r} is not {example}")
    authority, _, path = rest.partition("/")
    if path or "?" in authority or "#" in authority:
        raise ValueError(f"{text!r} has a path, query or fragment: it must be {example}")
    if "@" in authority:
        raise ValueError(f"{text!r} holds a user name: it must be {example}")
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        host, port = authority[: end + 1], authority[end + 1 :]
        if end < 0 or (port and not port.startswith(":")):
            raise ValueError(f"{text!r} is not {example}")
        port = port[1:]
        import ipaddress  # only for an IPv6 public URL: a default serve does without it

        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"{text!r} does not hold a valid IPv6 address") from None
        host = f"[{address.compressed}]"
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
    host = host.lower()
    if not host.startswith("[") and not _DNS_NAME.fullmatch(host):
        raise ValueError(
            f"{text!r} does not name a host (ASCII letters, digits, dots and hyphens; IDNs as xn--)"
        )
    if port or authority.endswith(":"):
        if not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
            raise ValueError(f"{text!r} does not have a TCP port from 1 to 65535")
    if scheme == "http" and host not in _LOOPBACK_HOSTS:
        raise ValueError(f"{text!r} is http:// on a host other than this machine: it must be {example}")
    origin = f"{scheme}://{host}"
    if port and int(port) != _DEFAULT_PORTS[scheme]:
        origin += f":{int(port)}"
    return origin


def parse_origins(text: str) -> tuple[str, ...]:
    """An allow-list of exact origins, or ("*",); an empty string allows none."""
    return tuple(part.strip().rstrip("/") for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class Option:
    """One setting: its name (flag and environment variable), its parser, and where it goes."""

    name: str
    parse: Callable[[str], Any]
    help: str
    target: str  # "settings" or "limits"

    @property
    def env(self) -> str:
        return "CLIENTMCP_" + self.name.upper().replace("-", "_")

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")


OPTIONS = (
    Option("host", str, "address to listen on (default 0.0.0.0)", "settings"),
    Option("port", _port, "TCP port to listen on (default 8080)", "settings"),
    Option(
        "allowed-origins",
        parse_origins,
        "comma-separated origins allowed on /mcp, or * (default: loopback origins only)",
        "settings",
    ),
    Option("log", _log_level, "error, warn, info (default) or debug", "settings"),
    Option("log-format", _log_format, "text (default) or json: one JSON object per line", "settings"),
    Option(
        "metrics",
        _metrics_address,
        "HOST:PORT of a separate listener serving Prometheus metrics at /metrics (default: none)",
        "settings",
    ),
    Option(
        "state",
        _state_path,
        "token generations, for `clientmcp revoke`: a SQLite file's PATH, or `nats` for the --nats "
        "cluster's JetStream bucket (default: none, gen is ignored)",
        "settings",
    ),
    Option(
        "nats",
        parse_nats,
        "NATS URLs, comma-separated: join the cluster of bridges sharing them (docs/scaling.md; "
        "credentials in CLIENTMCP_NATS or CLIENTMCP_NATS_CREDS, not on the command line)",
        "settings",
    ),
    Option(
        "workers",
        _positive_int,
        "processes sharing the port (SO_REUSEPORT), joined through --nats (default: one per core "
        "with --nats, else 1)",
        "settings",
    ),
    Option(
        "oauth",
        _oauth_mode,
        "off (default) or on: the bridge is also an OAuth 2.1 authorization server, each app a "
        "protected resource at PUBLIC_URL/apps/<client-id>/mcp (docs/oauth.md; needs --public-url)",
        "settings",
    ),
    Option(
        "oauth-client-documents",
        _oauth_mode,
        "on (default) or off: with --oauth on, a client may be known by the https:// URL of its "
        "metadata document, which the bridge then fetches (docs/oauth.md); off: clients register",
        "settings",
    ),
    Option(
        "public-url",
        parse_public_url,
        "the origin agents reach the bridge at, such as https://bridge.example: OAuth's issuer and "
        "resource URLs are built from it (required with --oauth on)",
        "settings",
    ),
    Option("call-timeout", parse_duration, "seconds an app has to answer a call (default 120)", "limits"),
    Option("max-head-bytes", _positive_int, "largest HTTP request head (default 16384)", "limits"),
    Option(
        "max-pipelined", _positive_int, "pipelined HTTP requests queued per connection (default 16)", "limits"
    ),
    Option("max-agent-connections", _positive_int, "HTTP connections in total (default 10000)", "limits"),
    Option("max-tools", _positive_int, "tools per register (default 1000)", "limits"),
    Option("max-calls-per-app", _positive_int, "calls in flight per app (default 1000)", "limits"),
    Option(
        "app-soft-bytes",
        _positive_int,
        "unsent bytes to an app before calls get busy (default 16 MiB)",
        "limits",
    ),
    Option(
        "app-hard-bytes",
        _positive_int,
        "unsent bytes to an app before it is closed (default 64 MiB)",
        "limits",
    ),
    Option(
        "app-soft-seconds",
        parse_duration,
        "seconds above the soft limit before closing (default 30)",
        "limits",
    ),
    Option(
        "max-streams-per-client", _positive_int, "notification streams per client ID (default 64)", "limits"
    ),
    Option("max-streams", _positive_int, "notification streams in total (default 10000)", "limits"),
    Option(
        "agent-rate",
        _rate,
        "requests a second per agent token, a burst of as many at once (default 1000; 0: no limit)",
        "limits",
    ),
    Option(
        "agent-max-calls",
        _non_negative_int,
        "calls in flight per agent token (default 100; 0: no limit)",
        "limits",
    ),
    Option(
        "max-app-connections",
        _non_negative_int,
        "app connections in total (default 0: the open-file limit less 10 %% for agents)",
        "limits",
    ),
    Option(
        "max-remote-apps",
        _positive_int,
        "with --nats: apps held by other instances whose tools this one keeps (default 100000)",
        "limits",
    ),
    Option("head-timeout", parse_duration, "seconds to send a full HTTP request head (default 10)", "limits"),
    Option(
        "keepalive-timeout",
        parse_duration,
        "seconds an idle HTTP connection stays open (default 75)",
        "limits",
    ),
    Option(
        "app-idle-timeout",
        parse_duration,
        "seconds of silence before an app is closed (default 90)",
        "limits",
    ),
)


@dataclass(frozen=True)
class Settings:
    """Everything `clientmcp serve` runs with."""

    secrets: tuple[bytes, ...]  # every secret accepted for verification
    signing_secret: bytes  # the secret new tokens are signed with
    host: str = "0.0.0.0"
    port: int = 8080
    # None: loopback origins only (http(s)://localhost, 127.0.0.1, [::1], any port).
    allowed_origins: tuple[str, ...] | None = None
    log: str = "info"
    log_format: str = "text"
    # Where the Prometheus metrics listener listens (docs/operations.md); None: no listener.
    metrics: tuple[str, int] | None = None
    # Where token generations are kept: a state file (clientmcp_fast/state.py), or `nats`, the
    # cluster's bucket (net/nats_state.py); None: gen is ignored.
    state: str | None = None
    # NATS servers of a cluster of bridges (net/nats.py); empty: a single process.
    nats: tuple[str, ...] = ()
    # Processes sharing the port (SO_REUSEPORT); above 1 needs `nats` (docs/scaling.md, Workers).
    # load() makes it one per core when `nats` is set and no number is given.
    workers: int = 1
    reuse_port: bool = False  # set in each worker process, never by an option
    # OAuth 2.1 beside the static tokens (docs/oauth.md): off by default; on needs `public_url`,
    # the origin agents reach (`https://bridge.example`), in its one spelling (parse_public_url).
    oauth: bool = False
    public_url: str | None = None
    # With OAuth on: whether a client may be known by its metadata document's URL, which the
    # bridge fetches (docs/oauth.md, Decisions); off, every client registers.
    oauth_client_documents: bool = True
    limits: Limits = field(default_factory=Limits)


def load_secrets(env: Mapping[str, str]) -> tuple[tuple[bytes, ...], bytes]:
    """Verification secrets and the signing secret from CLIENTMCP_SECRET(S); raises ConfigError."""
    named: list[tuple[str, bytes]] = []
    if env.get("CLIENTMCP_SECRET"):
        named.append(("CLIENTMCP_SECRET", env["CLIENTMCP_SECRET"].encode("utf-8")))
    for part in env.get("CLIENTMCP_SECRETS", "").split(","):
        if part.strip():
            named.append(("CLIENTMCP_SECRETS", part.strip().encode("utf-8")))
    if not named:
        raise ConfigError(
            "CLIENTMCP_SECRET is not set: export a secret of at least 32 bytes, "
            "e.g. CLIENTMCP_SECRET=$(openssl rand -hex 32)"
        )
    for name, secret in named:
        if len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"{name} holds a secret of {len(secret)} bytes: at least {MIN_SECRET_BYTES} are needed"
            )
    # The signer is CLIENTMCP_SECRET if set, else the first of the list (docs/configuration.md, Secrets and tokens).
    return tuple(dict.fromkeys(secret for _, secret in named)), named[0][1]


def add_options(parser: argparse.ArgumentParser, helps: Mapping[str, str] | None = None) -> None:
    """Add a flag for every setting; an absent flag leaves no attribute, so the environment fills in.

    `helps` replaces the help of the options it names, for a command whose defaults differ.
    """
    helps = helps or {}
    for option in OPTIONS:
        parser.add_argument(
            f"--{option.name}",
            dest=option.attr,
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=helps.get(option.name, option.help),
        )


def _parsed(
    env: Mapping[str, str], flags: argparse.Namespace | None, options: tuple[Option, ...] = OPTIONS
) -> dict[Option, Any]:
    """The value of each of `options` set by a flag or else the environment; raises ConfigError."""
    parsed: dict[Option, Any] = {}
    for option in options:
        raw = getattr(flags, option.attr, None) if flags is not None else None
        source = f"--{option.name}"
        if raw is None:
            raw = env.get(option.env)
            source = option.env
        if raw is None:
            continue
        try:
            parsed[option] = option.parse(raw)
        except ValueError as error:
            raise ConfigError(f"{source}: {error}") from None
    return parsed


def listen_address(env: Mapping[str, str]) -> tuple[str, int]:
    """The host and port `serve` would listen on with this environment (no secret needed)."""
    parsed = _parsed(env, None, tuple(option for option in OPTIONS if option.name in ("host", "port")))
    values = {option.attr: value for option, value in parsed.items()}
    return values.get("host", Settings.host), values.get("port", Settings.port)


def state_path(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> str | None:
    """The state file `--state` or CLIENTMCP_STATE names, `nats`, or None (no secret needed)."""
    parsed = _parsed(env, flags, tuple(option for option in OPTIONS if option.name == "state"))
    return next(iter(parsed.values()), None)


def nats_urls(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> tuple[str, ...]:
    """The NATS URLs `--nats` or CLIENTMCP_NATS names, or () (no secret needed)."""
    parsed = _parsed(env, flags, tuple(option for option in OPTIONS if option.name == "nats"))
    return next(iter(parsed.values()), ())


def address_text(host: str, port: int) -> str:
    """`host:port` as a URL writes it, an IPv6 address in brackets (`[::1]:8080`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# A listener on every address is reached from this machine on loopback.
_LOOPBACK_FOR = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def reachable_host(host: str) -> str:
    """The address a client on this machine dials for a listener on `host` (a wildcard: loopback)."""
    return _LOOPBACK_FOR.get(host, host)


def load(env: Mapping[str, str], flags: argparse.Namespace | None = None) -> Settings:
    """Settings from the environment, overridden by flags; raises ConfigError."""
    secrets, signing = load_secrets(env)
    values: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for option, value in _parsed(env, flags).items():
        (values if option.target == "settings" else limits)[option.attr] = value
    settings_limits = dataclasses.replace(Limits(), **limits)
    if settings_limits.app_hard_bytes < settings_limits.app_soft_bytes:
        raise ConfigError("app-hard-bytes must not be below app-soft-bytes")
    if "workers" not in values and values.get("nats"):  # a cluster uses every core of its host by default
        values["workers"] = cores()
    if values.get("workers", 1) > 1 and not values.get("nats"):
        raise ConfigError(
            "--workers above 1 needs --nats: each worker holds its own apps, and only NATS lets one reach another's"
        )
    if values.get("state") == STATE_NATS and not values.get("nats"):
        raise ConfigError("--state nats keeps token generations in the cluster's NATS: it needs --nats")
    if values.get("oauth") and not values.get("public_url"):
        raise ConfigError(
            "CLIENTMCP_OAUTH=on needs CLIENTMCP_PUBLIC_URL (or --public-url): the origin agents reach "
            "the bridge at, such as https://bridge.example"
        )
    if values.get("nats") and env.get("CLIENTMCP_NATS_CREDS"):
        check_nats_creds(env["CLIENTMCP_NATS_CREDS"])
    metrics, workers = values.get("metrics"), values.get("workers", 1)
    if workers > 1 and metrics and metrics[1] and metrics[1] + workers - 1 > 65535:
        raise ConfigError(
            f"--metrics: worker {workers - 1} would listen on port {metrics[1] + workers - 1}, "
            "above 65535 (worker k listens on the metrics port + k)"
        )
    return Settings(secrets=secrets, signing_secret=signing, limits=settings_limits, **values)


def worker_settings(settings: Settings, index: int) -> Settings:
    """The settings of worker `index` (from 0) of `--workers N`: one process sharing the port.

    Each worker has its own metrics, so each has its own listener: worker k on the metrics
    port + k (docs/operations.md, Workers); port 0 gives each a free port of its own.
    """
    metrics = settings.metrics
    if metrics is not None and metrics[1]:
        metrics = (metrics[0], metrics[1] + index)
    return dataclasses.replace(settings, workers=1, reuse_port=True, metrics=metrics)
