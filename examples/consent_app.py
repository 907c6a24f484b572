"""An app whose user decides which MCP hosts get in: `on_authorize` (docs/apps.md, Consent).

Run it beside a bridge with OAuth on (docs/oauth.md):

export CLIENTMCP_CLIENT_TOKEN=$(clientmcp token client my-app)
python examples/consent_app.py

Each request a host makes is printed with its code; answer y to let it in, then type the
code into the page the host opened. CLIENTMCP_CONNECT_URL names another bridge than
ws://127.0.0.1:8080/connect.
"""

import asyncio
import contextlib
import os

from clientmcp_fast.client import AuthorizeRequest, ClientMCP, completed


async def ask_user(request: AuthorizeRequest) -> bool:
    """Show the request and its code to the app's user: True only if they allow it."""
    # client_name is what the client chose to be called; client_origin is where the answer
    # goes, which it cannot fake.
    question = (
        f"{request.client_name or 'A client'} ({request.client_origin}) asks to use this app. "
        f"If that is you, type {request.code} into the page that asks for it. Allow? [y/N] "
    )
    answer = await asyncio.to_thread(input, question)
    return answer.strip().lower() == "y"


async def echo(arguments):
    return completed(str(arguments.get("text", "")))


async def main():
    url = os.environ.get("CLIENTMCP_CONNECT_URL", "ws://127.0.0.1:8080/connect")
    app = ClientMCP(url, os.environ["CLIENTMCP_CLIENT_TOKEN"], on_authorize=ask_user)
    app.expose("echo", echo, description="Say it back", input_schema={"type": "object"})
    async with app:  # connects, registers with "consent": true, answers until closed
        print(f"Connected to {url}; hosts that ask to use this app are shown here. Ctrl-C stops.", flush=True)
        await app.closed()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
