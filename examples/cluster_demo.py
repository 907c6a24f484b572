"""`make cluster-demo`: three bridge instances joined through NATS, behind nginx on one port.

Starts nats-server (deploy/nats.conf), three `clientmcp serve --nats` instances on loopback
ports of their own, and nginx with deploy/nginx-cluster.conf in front of them (round robin,
no sticky sessions); prints the one URL, a client and an agent token, and how to connect
the todo app and an agent. Any instance serves any request (docs/scaling.md). Ctrl-C stops
everything. Needs nats-server and nginx on the machine (apt-get install nats-server
nginx-light), and nats-py (pip install 'clientmcp-fast[nats]').

python examples/cluster_demo.py [--port 8080] [--client-id demo-todos]
"""

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clientmcp_fast.core.tokens import mint

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
INSTANCES = 3
TOKEN_TTL = 7 * 86400
START_SECONDS = 20


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def program(name):
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        sys.exit(f"cluster-demo: {name} is missing (apt-get install {name})")
    return found


def nginx_config(folder, port, instance_ports):
    """deploy/nginx-cluster.conf on loopback, inside a main configuration of its own."""
    site = (DEPLOY / "nginx-cluster.conf").read_text()
    servers = "".join(f"    server 127.0.0.1:{p};\n" for p in instance_ports)
    upstream = "".join(f"    server clientmcp-{n}:8080;\n" for n in range(1, INSTANCES + 1))
    site = site.replace(upstream, servers).replace("listen 8080;", f"listen 127.0.0.1:{port};")
    (folder / "site.conf").write_text(site)
    temp = "".join(
        f"{kind}_temp_path {folder}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # The access log names the instance of every request: watch it spread them.
    log = "log_format upstream '$request_uri $status $upstream_addr';\n"
    (folder / "nginx.conf").write_text(
        f"daemon off;\nmaster_process off;\npid {folder}/nginx.pid;\nerror_log {folder}/nginx-error.log warn;\n"
        f"events {{}}\nhttp {{\n{log}access_log {folder}/access.log upstream;\n{temp}"
        f"include {folder}/site.conf;\n}}\n"
    )
    return folder / "nginx.conf"


class Stopped(Exception):
    """Ctrl-C or SIGTERM asked the demo to stop: everything it started is stopped, with status 0."""


def stop_on_signals(stop):
    """Ctrl-C and SIGTERM append to `stop`, even where SIGINT came ignored (a script's background job)."""
    # nats-server and nginx always take the group's Ctrl-C as theirs: a demo deaf to it would see
    # them end and report a failure.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(True))


def ended_by_itself(processes, stop):
    """The first process that ended, or None; raises Stopped once a stop was asked."""
    ended = next((process for process in processes if process.poll() is not None), None)
    # Ctrl-C reaches the whole group at once: its handler here has run by the time poll() returns
    # for a child it ended, so a stop asked by now is why that child ended.
    if stop:
        raise Stopped
    return ended


def wait_for(what, ready, processes, stop):
    """Return once ready(); exit saying `what` if a process ends by itself or START_SECONDS pass first."""
    give_up = time.monotonic() + START_SECONDS
    while (ended := ended_by_itself(processes, stop)) is None:
        if ready():
            return
        if time.monotonic() > give_up:
            sys.exit(f"cluster-demo: {what} within {START_SECONDS} s")
        time.sleep(0.05)
    sys.exit(f"cluster-demo: {what}: a process ended with status {ended.returncode}")


def supervise(processes, stop):
    """Run until a stop is asked (0), or until a process ends by itself (1, saying which on stderr)."""
    try:
        while (ended := ended_by_itself(processes, stop)) is None:
            time.sleep(0.2)
    except Stopped:
        return 0
    print(f"cluster-demo: {ended.args[0]} ended ({ended.returncode}): stopping", file=sys.stderr)
    return 1


def listening(port):
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080, help="the one port, nginx's (0: a free one)")
    parser.add_argument("--client-id", default="demo-todos", help="the client ID of the printed tokens")
    options = parser.parse_args()
    port = options.port or free_port()
    secret = secrets.token_hex(32)  # of this demo only: its tokens are valid nowhere else
    folder = Path(tempfile.mkdtemp(prefix="clientmcp-cluster-"))
    processes = []
    stop = []
    stop_on_signals(stop)
    try:
        nats_port = free_port()
        # deploy/nats.conf lets only the instances on the bus: a password of this demo's own,
        # begun with letters, as nats-server would read one like 12e4... as a number (nats.conf).
        password = f"nats-{secrets.token_hex(32)}"
        nats_url = f"nats://clientmcp:{password}@127.0.0.1:{nats_port}"
        nats_conf = str(DEPLOY / "nats.conf")
        nats = [program("nats-server"), "-c", nats_conf, "-a", "127.0.0.1", "-p", str(nats_port)]
        nats_env = {**os.environ, "CLIENTMCP_NATS_PASSWORD": password}
        with open(folder / "nats.log", "w") as log:
            processes.append(subprocess.Popen(nats, env=nats_env, stdout=log, stderr=log))
        wait_for("nats-server did not listen", lambda: listening(nats_port), processes, stop)
        instance_ports = [free_port() for _ in range(INSTANCES)]
        env = {
            **os.environ,
            "CLIENTMCP_SECRET": secret,
            "CLIENTMCP_HOST": "127.0.0.1",
            "CLIENTMCP_NATS": nats_url,
        }
        for number, instance_port in enumerate(instance_ports, 1):
            serve = [
                sys.executable,
                "-m",
                "clientmcp_fast",
                "serve",
                "--port",
                str(instance_port),
                "--workers",
                "1",
            ]
            with open(folder / f"clientmcp-{number}.log", "w") as log:
                processes.append(subprocess.Popen(serve, env=env, stdout=log, stderr=log))

        def joined():
            logs = [(folder / f"clientmcp-{n}.log").read_text() for n in range(1, INSTANCES + 1)]
            return all("nats: joined the cluster" in text for text in logs)

        wait_for("the instances did not join the cluster", joined, processes, stop)
        nginx = [program("nginx"), "-e", str(folder / "nginx-error.log"), "-p", str(folder)]
        nginx += ["-c", str(nginx_config(folder, port, instance_ports))]
        processes.append(subprocess.Popen(nginx, stderr=subprocess.DEVNULL))
        wait_for(f"nginx did not listen on 127.0.0.1:{port}", lambda: listening(port), processes, stop)

        now = time.time()
        client = mint(secret.encode(), "client", options.client_id, TOKEN_TTL, now)
        agent = mint(secret.encode(), "agent", options.client_id, TOKEN_TTL, now)
        ports = ", ".join(str(p) for p in instance_ports)
        print(
            f"""\
Three bridges (127.0.0.1 ports {ports}) joined through nats-server (127.0.0.1:{nats_port}, with a password),
behind nginx on one port, without sticky sessions: any instance serves any request.

  apps connect to:   ws://127.0.0.1:{port}/connect
  agents call:       http://127.0.0.1:{port}/mcp

client token: {client}
agent token: {agent}

Connect the todo app (its requests go to whichever instance nginx picks):
  CLIENTMCP_CONNECT_URL=ws://127.0.0.1:{port}/connect CLIENTMCP_CLIENT_TOKEN={client} \\
    python examples/todo_app.py
Then an agent (each request again to any instance):
  CLIENTMCP_AGENT_URL=http://127.0.0.1:{port}/mcp CLIENTMCP_AGENT_TOKEN={agent} \\
    python examples/agent_sdk.py
  claude mcp add --transport http {options.client_id} http://127.0.0.1:{port}/mcp \\
    --header "Authorization: Bearer {agent}"

Logs, and nginx's access log naming the instance of each request: {folder}
Ctrl-C stops them all.""",
            flush=True,
        )
        return supervise(processes, stop)
    except Stopped:
        return 0
    finally:
        for process in reversed(processes):  # nginx, the instances (gracefully), then NATS
            if process.poll() is None:
                process.terminate()
        for process in reversed(processes):
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
