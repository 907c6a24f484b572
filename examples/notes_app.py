"""A notes app showing what the library offers: the four risk levels, outcomes, results, progress, logging.

Run it beside a bridge (`clientmcp serve`, as the README's "Run a bridge" says):

export CLIENTMCP_CLIENT_TOKEN=$(clientmcp token client notes)
python examples/notes_app.py

CLIENTMCP_CONNECT_URL names another bridge than ws://127.0.0.1:8080/connect.
"""

import asyncio
import contextlib
import logging
import os

from clientmcp_fast.client import ClientMCP, accepted, completed, rejected

notes: dict[str, str] = {}
NAMED = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def list_notes(arguments):  # a dict: sent as JSON text and as structuredContent
    return {"names": sorted(notes)}


async def read_note(arguments):  # a string: one text block; a KeyError: a tool error saying so
    return notes[arguments["name"]]


async def search_notes(arguments, call):  # a second parameter: the call, to report progress on
    found = []
    for done, name in enumerate(sorted(notes), start=1):
        if arguments["text"] in notes[name]:
            found.append(name)
        await call.report(done, len(notes), f"Searched {name}")
    return {"names": found}


async def write_note(arguments):  # completed: the change holds
    notes[arguments["name"]] = arguments["text"]
    return completed(f"Saved {arguments['name']}", name=arguments["name"])


async def delete_note(arguments):  # rejected: nothing changed, and why
    if arguments["name"] not in notes:
        return rejected("not_found", f"There is no note {arguments['name']!r}.")
    del notes[arguments["name"]]
    return completed(f"Deleted {arguments['name']}")


async def mail_notes(arguments):  # accepted: it started, and goes on as an operation of its own
    return accepted(
        f"mail-{len(notes)}", f"Mailing {len(notes)} notes to {arguments['to']}.", count=len(notes)
    )


async def main():
    logging.basicConfig(level=logging.INFO)  # the library logs to `clientmcp.client`
    url = os.environ.get("CLIENTMCP_CONNECT_URL", "ws://127.0.0.1:8080/connect")
    app = ClientMCP(url, os.environ["CLIENTMCP_CLIENT_TOKEN"], instructions="Notes, each with a unique name.")
    app.expose("list_notes", list_notes, description="The names of all notes", risk="observe")
    app.expose("read_note", read_note, description="A note's text", input_schema=NAMED, risk="observe")
    app.expose(
        "search_notes",
        search_notes,
        description="The names of the notes whose text holds some text",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        risk="observe",
    )
    app.expose(
        "write_note",
        write_note,
        description="Create or replace a note",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
            "required": ["name", "text"],
        },
        risk="operate",
    )
    app.expose("delete_note", delete_note, description="Delete a note", input_schema=NAMED, risk="manage")
    app.expose(
        "mail_notes",
        mail_notes,
        description="Mail every note to an address",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        risk="transact",
    )
    async with app:
        await app.closed()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
