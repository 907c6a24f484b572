"""A `register` message checked against ClientMCP v1 §3.2 and docs/protocol.md, and the tool set it declares."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from weakref import WeakValueDictionary

import msgspec

from clientmcp_fast.core.jsonrpc import encode_json
from clientmcp_fast.core.limits import MAX_CLOSE_REASON_BYTES
from clientmcp_fast.core.memo import remember
from clientmcp_fast.core.messages import decode_raw_list, decode_tool_head
from clientmcp_fast.core.param_headers import HeaderParam, InvalidAnnotation, header_params
from clientmcp_fast.speedups import json_member

if TYPE_CHECKING:
    from clientmcp_fast.core.tokens import ToolScope

TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class RegisterError(ValueError):
    """A register the bridge refuses; the message names the tool and the problem (close 4400)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One declared tool: its name and its header-mirrored arguments (its bytes are in `tools_json`)."""

    name: str
    header_params: tuple[HeaderParam, ...]
    wire_name: bytes  # the name as it goes into a `call` (a valid name is ASCII, never escaped)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ToolSet:
    """Everything one accepted register declares; the next register replaces it whole."""

    tools: dict[str, Tool]  # in declared order
    tools_json: bytes  # the JSON array of tools, as the app declared them
    instructions: str | None
    consent: bool = False  # the app answers `authorize` (docs/protocol.md, Consent)
    progress: bool = False  # the app may report a call's progress (docs/protocol.md, Progress)
    # Calls to the app carry the trace context (docs/protocol.md, Trace context). An app held by
    # another instance has it always: that instance, which knows the app, decides (core/forwarding.py).
    trace: bool = False
    # Either extension: what a tools/call reads first, so that a call to an app with neither
    # does not read the agent's progress token or trace context at all.
    extended: bool = False
    # tools_json within each scope agents listed it with, by the scope's key (`scoped_tools_json`).
    scoped: dict[frozenset[str], bytes] = field(default_factory=dict, compare=False, repr=False)

    def same_tools(self, other: ToolSet | None) -> bool:
        """Whether `other` declares exactly these tools (a change announces list_changed)."""
        return other is not None and other.tools_json == self.tools_json


EMPTY_TOOLSET = ToolSet({}, b"[]", None)

# Scoped views kept per tool set: scopes are chosen by whoever mints, so they are bounded too.
MAX_SCOPED_VIEWS = 64


def scoped_tools_json(toolset: ToolSet, scope: ToolScope) -> bytes:
    """The JSON array of the tools of `toolset` that `scope` allows, in declared order, as the app sent each.

    Made once per tool set and scope (the array split again at its elements), then kept with
    the tool set, so that a scoped tools/list costs a lookup like an unscoped one.
    """
    view = toolset.scoped.get(scope.key)
    if view is None:
        elements = decode_raw_list(toolset.tools_json) if toolset.tools else []
        # toolset.tools is in declared order, as the array's elements are.
        kept = [bytes(raw) for raw, name in zip(elements, toolset.tools) if scope.allows(name)]
        view = b"[" + b",".join(kept) + b"]"
        remember(toolset.scoped, scope.key, view, MAX_SCOPED_VIEWS)
    return view


# Apps of one application declare the same tools: the same register is checked once, and
# one ToolSet serves every app that sent it, for as long as one of them holds it. With
# 10,000 idle tabs of one web app, that is most of an idle app's memory.
_SHARED: WeakValueDictionary[tuple[bytes, str | None, int, bool, bool, bool], ToolSet] = WeakValueDictionary()


def _problem(index: int, name: Any, problem: str) -> RegisterError:
    """`tools[i] "name": problem`, the name cut so that the whole fits a close frame (docs/protocol.md, Close codes)."""
    head = f"tools[{index}]"
    if isinstance(name, str):
        # A close reason is cut at 123 bytes: shorten the name rather than lose the problem.
        room = MAX_CLOSE_REASON_BYTES - len(f"{head} : {problem}".encode())
        name = name[:40]
        while True:
            shown = encode_json(name).decode()
            if len(shown.encode()) <= room:
                return RegisterError(f"{head} {shown}: {problem}")
            if not name:
                break
            name = name[:-1]
    return RegisterError(f"{head}: {problem}")


def json_boolean(raw: msgspec.Raw) -> bool | None:
    """A member kept as Raw read as a JSON boolean; None when it is any other value."""
    value = bytes(raw)
    return True if value == b"true" else False if value == b"false" else None


def _flag(raw: msgspec.Raw | msgspec.UnsetType, member: str) -> bool:
    """An optional boolean member of a register (an extension the app opts into); absent is false."""
    if raw is msgspec.UNSET:
        return False
    value = json_boolean(raw)
    if value is None:
        raise RegisterError(f"register: {member} must be true or false")
    return value


def parse_register(
    tools: msgspec.Raw | msgspec.UnsetType,
    instructions: msgspec.Raw | msgspec.UnsetType,
    max_tools: int,
    consent: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
    progress: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
    trace: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
) -> ToolSet:
    """The tool set of a register's tools, instructions and extension flags, each as sent; raises `RegisterError`."""
    text = json_member(instructions)
    if text is msgspec.UNSET:
        text = None
    elif not isinstance(text, str):
        raise RegisterError("register: instructions must be a string")
    asks = _flag(consent, "consent")
    reports = _flag(progress, "progress")
    traced = _flag(trace, "trace")
    if tools is msgspec.UNSET:
        raise RegisterError("register: tools is missing")
    key = (bytes(tools), text, max_tools, asks, reports, traced)
    shared = _SHARED.get(key)
    if shared is not None:
        return shared
    try:
        raw_tools = decode_raw_list(tools)
    except msgspec.ValidationError:
        raise RegisterError("register: tools must be an array") from None
    except RecursionError:
        raise RegisterError("register: tools nest too deeply") from None
    if len(raw_tools) > max_tools:
        raise RegisterError(f"register: {len(raw_tools)} tools, over the limit of {max_tools}")
    declared: dict[str, Tool] = {}
    for index, raw in enumerate(raw_tools):
        try:
            head = decode_tool_head(raw)
        except msgspec.ValidationError:
            raise RegisterError(f"tools[{index}]: not an object") from None
        except RecursionError:
            raise RegisterError(f"tools[{index}]: nests too deeply") from None
        name = head.name
        if name is msgspec.UNSET:
            raise _problem(index, name, "name is missing")
        if not isinstance(name, str):
            raise _problem(index, name, "name must be a string")
        if not TOOL_NAME.fullmatch(name):
            if not 1 <= len(name) <= 128:
                raise _problem(index, name, "name must be 1-128 characters")
            raise _problem(index, name, "name has invalid characters")
        if name in declared:
            raise _problem(index, name, "name declared twice")
        schema = head.inputSchema
        if schema is msgspec.UNSET:
            raise _problem(index, name, "inputSchema is missing")
        if not isinstance(schema, dict):
            raise _problem(index, name, "inputSchema must be an object")
        if schema.get("type") != "object":
            raise _problem(index, name, 'inputSchema needs "type": "object"')
        try:
            params = header_params(schema)
        except InvalidAnnotation as error:
            raise _problem(index, name, str(error)) from None
        declared[name] = Tool(name, params, name.encode())
    # Every tool was checked, so every element of the array is in the set: the bytes the app
    # sent are kept once, as the array tools/list answers with.
    tools_json = b"[" + b",".join(raw_tools) + b"]"
    toolset = _SHARED[key] = ToolSet(declared, tools_json, text, asks, reports, traced, reports or traced)
    return toolset
