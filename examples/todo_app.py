"""A todo app that lets AI agents add to its list, through a ClientMCP bridge.

Run it beside a bridge (`clientmcp serve`, as the README's "Run a bridge" says):

export CLIENTMCP_CLIENT_TOKEN=$(clientmcp token client my-app)
python examples/todo_app.py

CLIENTMCP_CONNECT_URL names another bridge than ws://127.0.0.1:8080/connect.
"""

import asyncio
import contextlib
import os

from clientmcp_fast.client import ClientMCP, completed

todos: list[str] = []


async def add_todo(arguments):
    todos.append(arguments["title"])
    return completed(f"Added {arguments['title']}", count=len(todos))


async def main():
    url = os.environ.get("CLIENTMCP_CONNECT_URL", "ws://127.0.0.1:8080/connect")
    app = ClientMCP(url, os.environ["CLIENTMCP_CLIENT_TOKEN"])
    app.expose(
        "add_todo",
        add_todo,
        description="Add a todo",
        risk="operate",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    )
    async with app:  # connects, registers, answers calls until closed
        print(f"Connected to {url} with the tool add_todo; Ctrl-C stops.", flush=True)
        await app.closed()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
