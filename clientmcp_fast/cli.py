"""The `clientmcp` command: `serve` (the default), `token`, `revoke`, `health` and `demo` (docs/configuration.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from collections.abc import Sequence

from clientmcp_fast import __version__
from clientmcp_fast.config import (
    ConfigError,
    add_options,
    listen_address,
    load,
    load_secrets,
    parse_duration,
    worker_settings,
)
from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN, MAX_SCOPE_ENTRIES, TokenError, mint, scope_of

DEFAULT_TTL = "24h"
# Set by `serve --workers N` in each worker's environment to its index, from 0 (clientmcp_fast/workers.py).
WORKER_ENV = "CLIENTMCP_WORKER"
_SECRETS_NOTE = (
    "The secret comes from CLIENTMCP_SECRET (or CLIENTMCP_SECRETS, comma-separated, for rotation), "
    "never from a flag, since a command line shows in `ps`; every flag can also be set as CLIENTMCP_<FLAG>."
)
_NATS_HELP = (
    "with --state nats: the NATS URLs, comma-separated (or CLIENTMCP_NATS, where credentials belong; "
    "CLIENTMCP_NATS_CREDS names a creds file)"
)
# A value that starts with a dash and a digit (`-5m`, `-1`): a value, never an option of ours.
_DASHED_VALUE = re.compile(r"-\d")


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, given the terminal's width: to find it alone, it imports shutil.

    shutil brings zlib, bz2 and lzma, some 0.6 MB in every bridge process, which formats
    no help but makes formatters as its options are declared.
    """

    def __init__(self, prog: str) -> None:
        try:
            columns = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size().columns
        except (ValueError, OSError):
            columns = 80  # as shutil.get_terminal_size falls back
        super().__init__(prog, width=columns - 2)


class _Version(argparse.Action):
    """`--version`: the version and which build runs (compiled, pure or mixed; see speedups.build)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from clientmcp_fast.speedups import build

        print(f"clientmcp {__version__} ({build()})")
        parser.exit(0)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"clientmcp: error: {message} (see clientmcp --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="clientmcp",
        description="ClientMCP bridge: apps connect over WebSocket at /connect, agents use MCP at /mcp. "
        f"Without a command, runs `serve`. {_SECRETS_NOTE}",
    )
    parser.add_argument(
        "--version", action=_Version, help="print the version and the build (compiled or pure)"
    )
    add_options(parser)
    commands = parser.add_subparsers(
        dest="command", metavar="{serve,token,revoke,health,demo}", parser_class=_Parser
    )
    serve = commands.add_parser("serve", help="run the bridge (the default)", description=_SECRETS_NOTE)
    add_options(serve)
    token = commands.add_parser("token", help="mint a token: prints the JWT alone on stdout")
    token.add_argument("role", choices=("client", "agent"), help="client: the app connects; agent: calls it")
    token.add_argument("client_id", metavar="ID", help="the client ID (1-128 of A-Z a-z 0-9 _ - . : @)")
    token.add_argument("--ttl", default=DEFAULT_TTL, help="lifetime, e.g. 3600s, 15m, 24h, 30d (default 24h)")
    token.add_argument(
        "--tools",
        metavar="NAMES",
        help="agent tokens only: the tools it may see and call, comma-separated names and "
        "prefixes ending in * (a,b,read_*); default: every tool",
    )
    token.add_argument(
        "--state",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="with a state file, or `nats` (or CLIENTMCP_STATE), the token carries the current "
        "generation, named on stderr",
    )
    token.add_argument("--nats", default=argparse.SUPPRESS, metavar="URLS", help=_NATS_HELP)
    revoke = commands.add_parser(
        "revoke",
        help="revoke every token of an ID and role: raises its generation, prints the new one",
        description="Raises the generation of ID in ROLE in the state store (--state or CLIENTMCP_STATE: "
        "a state file, or `nats` for the cluster's bucket on --nats or CLIENTMCP_NATS), which every bridge "
        "using the same store follows (a file within 0.1 s, the bucket within a NATS round trip): its "
        "tokens minted before are refused from then on, and an app connected with one is closed with "
        "4401. No secret is needed.",
    )
    revoke.add_argument("role", choices=("client", "agent"), help="which tokens: the app's or the agents'")
    revoke.add_argument("client_id", metavar="ID", help="the client ID (1-128 of A-Z a-z 0-9 _ - . : @)")
    revoke.add_argument(
        "--state",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="the state file, or `nats` for the cluster's bucket (or CLIENTMCP_STATE)",
    )
    revoke.add_argument("--nats", default=argparse.SUPPRESS, metavar="URLS", help=_NATS_HELP)
    health = commands.add_parser(
        "health",
        help="exit 0 if a bridge answers /healthz with ok, else 1 with the reason (for health checks)",
    )
    health.add_argument(
        "--url",
        help="the URL to ask (default http://127.0.0.1:PORT/healthz, PORT and the address from "
        "CLIENTMCP_PORT and CLIENTMCP_HOST)",
    )
    health.add_argument("--timeout", default="3s", help="how long to wait for the answer (default 3s)")
    demo = commands.add_parser(
        "demo",
        help="run a bridge on 127.0.0.1 with the shared todo list, and print how to connect",
        description="A bridge with a secret of its own and the shared todo list: a web page it serves "
        "(or, with --python-app, the same app in Python); it prints the page's URL, the agent URL, a "
        "token and the `claude mcp add` line. It takes the settings of `serve` (flags and "
        "CLIENTMCP_<FLAG>), but listens on 127.0.0.1 and logs warnings only unless told otherwise; "
        "CLIENTMCP_SECRET is not read, so that no token it prints is valid on another bridge. With "
        "--oauth it also prints the app's OAuth URL, for MCP hosts that sign in with OAuth.",
        # --oauth is redefined below: alone, it means on.
        conflict_handler="resolve",
    )
    add_options(
        demo,
        helps={
            "host": "address to listen on (default 127.0.0.1)",
            "port": "TCP port to listen on (default 8080; 0 picks a free one)",
            "log": "error, warn (default), info or debug",
            "public-url": "with --oauth, the origin agents reach the bridge at (default: the demo's own "
            "http://127.0.0.1:PORT)",
        },
    )
    demo.add_argument(
        "--oauth",
        dest="oauth",
        nargs="?",
        const="on",
        default=argparse.SUPPRESS,
        metavar="on|off",
        help="OAuth on (alone, or `on`) or off (default): print the app's OAuth URL to paste into an MCP "
        "host; the todo page asks you to allow each host and shows the code for the consent page",
    )
    demo.add_argument(
        "--page-port",
        type=int,
        metavar="PORT",
        help="TCP port of the todo page (default: the bridge's port + 1; any free one with --port 0)",
    )
    demo.add_argument(
        "--python-app",
        action="store_true",
        help="connect the todo app written in Python instead of serving the page (no browser needed)",
    )
    return parser


def _attach_dashed_values(argv: Sequence[str]) -> list[str]:
    """`--ttl -5m` as `--ttl=-5m`, which argparse would otherwise take for an unknown option."""
    words = list(argv)
    attached: list[str] = []
    while words:
        word = words.pop(0)
        if word == "--":  # everything after is an argument already
            attached.append(word)
            attached.extend(words)
            break
        if word.startswith("--") and "=" not in word and words and _DASHED_VALUE.match(words[0]):
            word = f"{word}={words.pop(0)}"
        attached.append(word)
    return attached


def _serve(flags: argparse.Namespace) -> int:
    from clientmcp_fast import log
    from clientmcp_fast.net.server import Server, new_event_loop

    settings = load(os.environ, flags)
    log.configure(settings.log, format=settings.log_format)
    worker = os.environ.get(WORKER_ENV, "")
    if worker.isdigit():  # worker k (from 0) of `--workers N`: it serves, sharing the port
        settings = worker_settings(settings, int(worker))
    elif settings.workers > 1:
        from clientmcp_fast.workers import run_workers

        if settings.state is not None:
            _check_store(settings.state, settings.nats)  # one line, before any worker says it too
        return run_workers(settings.workers, WORKER_ENV)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:  # an address that cannot be listened on raises ConfigError: exit 2, as a bad setting
        loop.run_until_complete(Server(settings, loop).run())
    finally:
        loop.close()
    return 0


def _check_store(path: str, nats_urls: tuple[str, ...]) -> None:
    """Open and close the state store `--state` names; ConfigError (exit 2) when it cannot be used."""
    from clientmcp_fast.state import StoreError, open_store

    try:
        open_store(path, nats_urls).close()
    except StoreError as error:
        raise ConfigError(str(error)) from None


def _token(flags: argparse.Namespace) -> int:
    _, signing = load_secrets(os.environ)
    try:
        ttl = parse_duration(flags.ttl)
    except ValueError as error:
        raise ConfigError(f"--ttl: {error}") from None
    if not CLIENT_ID_PATTERN.fullmatch(flags.client_id):
        raise ConfigError("ID must be 1-128 characters of A-Z a-z 0-9 _ - . : @")
    tools = None
    if flags.tools is not None:
        if flags.role != "agent":
            raise ConfigError("--tools scopes an agent token: a client token has no scope")
        tools = [entry.strip() for entry in flags.tools.split(",")]
        try:
            scope_of(tools)
        except TokenError:
            raise ConfigError(
                f"--tools: {flags.tools!r} is not 1-{MAX_SCOPE_ENTRIES} comma-separated tool names "
                "or prefixes ending in * (a,b,read_*)"
            ) from None
    generation = None
    path = _state_path(flags)
    if path is not None:
        read = _with_store(
            path, flags, lambda store: (store.current(flags.role, flags.client_id), store.path)
        )
        if read is None:
            return 1
        generation, where = read
        print(
            f"clientmcp: {flags.role} generation {generation} of {flags.client_id} (from {where})",
            file=sys.stderr,
        )
    print(mint(signing, flags.role, flags.client_id, ttl, time.time(), gen=generation, tools=tools))
    return 0


def _revoke(flags: argparse.Namespace) -> int:
    path = _state_path(flags)
    if path is None:
        raise ConfigError(
            "revoke needs the state file of the bridge, or `nats` for its cluster's: set CLIENTMCP_STATE or --state"
        )
    if not CLIENT_ID_PATTERN.fullmatch(flags.client_id):
        raise ConfigError("ID must be 1-128 characters of A-Z a-z 0-9 _ - . : @")
    generation = _with_store(path, flags, lambda store: store.raise_generation(flags.role, flags.client_id))
    if generation is None:
        return 1
    print(generation)
    return 0


def _state_path(flags: argparse.Namespace) -> str | None:
    from clientmcp_fast.config import state_path

    return state_path(os.environ, flags)


def _with_store(path: str, flags: argparse.Namespace, work):  # work: GenerationStore -> T (state.py)
    """`work(store)` on the state store `path` names; None after saying why it failed (exit 1).

    A store that cannot be opened is a bad setting (ConfigError, exit 2): a file that is not
    one, NATS unreachable or without JetStream; so is a row whose generation is not one
    (written by hand), which running again would not mend. One that opens and then fails
    (another writer holding the file past the busy timeout, NATS lost) may work when run again.
    """
    from clientmcp_fast.config import nats_urls
    from clientmcp_fast.state import BadGenerationError, StoreError, open_store

    try:
        store = open_store(path, nats_urls(os.environ, flags))
    except StoreError as error:
        raise ConfigError(str(error)) from None
    try:
        return work(store)
    except BadGenerationError as error:
        raise ConfigError(str(error)) from None
    except StoreError as error:
        print(f"clientmcp: {error}", file=sys.stderr)
        return None
    finally:
        store.close()


def _health(flags: argparse.Namespace) -> int:
    from clientmcp_fast.health import default_url, problem, target

    try:
        timeout = parse_duration(flags.timeout)
    except ValueError as error:
        raise ConfigError(f"--timeout: {error}") from None
    try:
        asked = target(flags.url or default_url(*listen_address(os.environ)))
    except ValueError as error:
        raise ConfigError(f"--url: {error}") from None
    reason = problem(asked, timeout)
    if reason is not None:
        print(f"clientmcp: unhealthy: {reason}", file=sys.stderr)
        return 1
    print(f"ok: {asked.url}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit status is returned."""
    flags = _parser().parse_args(_attach_dashed_values(sys.argv[1:] if argv is None else argv))
    try:
        if flags.command == "token":
            return _token(flags)
        if flags.command == "revoke":
            return _revoke(flags)
        if flags.command == "health":
            return _health(flags)
        if flags.command == "demo":
            from clientmcp_fast.demo import run_demo

            return run_demo(os.environ, flags)
        return _serve(flags)
    except ConfigError as error:
        print(f"clientmcp: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
