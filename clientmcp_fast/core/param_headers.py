"""`x-mcp-header` annotations on tool schemas (MCP 2026-07-28, basic/transports), found the way the MCP SDK finds them.

A register is refused when an annotation breaks MCP's rules (docs/protocol.md, Register validation); the
annotations kept here are what modern `tools/call` requests are checked against.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from clientmcp_fast.core.jsonrpc import decode_json
from clientmcp_fast.speedups import first_byte

X_MCP_HEADER = "x-mcp-header"
HEADER_TYPES = frozenset({"string", "integer", "boolean"})
RFC9110_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# JSON Schema 2020-12 applicators whose values are schema positions. Only `properties`
# keeps a path an annotation may sit on; data keywords (default, const, enum, examples)
# and $ref are not entered, so data is never mistaken for an annotation.
_SUBSCHEMA_SINGLE = frozenset(
    {
        "items",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


# Property and header names are the app's: cut in messages, which end up in a close
# reason of at most 123 bytes that must still name the problem (docs/protocol.md, Close codes).
_SHOWN_BYTES = 30


def _quoted(text: str) -> str:
    text = text[:_SHOWN_BYTES]
    while len(repr(text).encode()) > _SHOWN_BYTES:
        text = text[:-1]
    return repr(text)


class InvalidAnnotation(ValueError):
    """An `x-mcp-header` annotation breaks MCP's constraints; the message names it."""


@dataclass(frozen=True, slots=True)
class HeaderParam:
    """One annotated argument: it travels as header `Mcp-Param-<name>` beside the body."""

    header: str  # lower-cased full header name, "mcp-param-<name>"
    path: tuple[str, ...]  # property names from the schema root
    type: str  # "string", "integer" or "boolean"


def _schema_positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict]]:
    """Every schema position with its chain of `properties` keys, or None once off that chain."""
    # An explicit stack: an app's deeply nested schema must not exhaust the C stack.
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif keyword in _SUBSCHEMA_SINGLE:
                stack.append((None, value))
            elif keyword in _SUBSCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _SUBSCHEMA_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def header_params(input_schema: dict) -> tuple[HeaderParam, ...]:
    """The annotated arguments of a tool's inputSchema; raises `InvalidAnnotation`."""
    found: dict[str, HeaderParam] = {}
    for path, schema in _schema_positions(input_schema):
        if X_MCP_HEADER not in schema:
            continue
        if not path:
            raise InvalidAnnotation(
                f"{X_MCP_HEADER} is only allowed on a property reached through properties"
            )
        where = _quoted(".".join(path))
        name = schema[X_MCP_HEADER]
        if not isinstance(name, str) or not RFC9110_TOKEN.fullmatch(name):
            raise InvalidAnnotation(f"{X_MCP_HEADER} of {where} is not an HTTP token")
        prop_type = schema.get("type")
        if not isinstance(prop_type, str) or prop_type not in HEADER_TYPES:
            raise InvalidAnnotation(f"{X_MCP_HEADER} of {where} needs type string, integer or boolean")
        header = "mcp-param-" + name.lower()
        if header in found:
            raise InvalidAnnotation(f"{X_MCP_HEADER} {_quoted(name)} is declared twice")
        found[header] = HeaderParam(header, path, prop_type)
    return tuple(found.values())


_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
_CANONICAL_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def decode_header_value(value: str) -> str | None:
    """A header value with its `=?base64?...?=` wrapping undone; None when the wrapping is malformed."""
    if not value.startswith("=?base64?"):
        return value  # the usual case, told without running the pattern (an Mcp-Name on every call)
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group(1)
    try:
        decoded = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Only the canonical encoding is accepted, as the MCP SDK does: one value, one spelling.
    if base64.b64encode(decoded).decode("ascii") != payload:
        return None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _matches(param_type: str, value: Any, rendered: str, decoded: str) -> bool:
    if (
        param_type == "integer"
        and not isinstance(value, bool)
        and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))
        and _CANONICAL_DECIMAL.fullmatch(decoded)
    ):
        # Integers compare as numbers (MCP 2026-07-28: 42.0 == 42), exactly, without floats.
        whole, _, fraction = decoded.partition(".")
        return (not fraction or set(fraction) == {"0"}) and int(whole) == int(value)
    return decoded == rendered


@functools.lru_cache(maxsize=1024)  # the keys come from apps' schemas: bounded
def _members_decoder(keys: tuple[str, ...]) -> Callable[[bytes | msgspec.Raw], Any]:
    """A decoder of a JSON object that keeps the members `keys` names as JSON, and skips the others."""
    members = [
        (f"m{index}", msgspec.Raw | msgspec.UnsetType, msgspec.field(default=msgspec.UNSET, name=key))
        for index, key in enumerate(keys)
    ]
    return msgspec.json.Decoder(msgspec.defstruct("Members", members, gc=False)).decode


def _argument_values(paths: list[tuple[str, ...]], arguments: bytes | msgspec.Raw) -> list[Any]:
    """The argument at each path, if it is a string, number or boolean; else None (absent, null, array, object).

    Only what the paths name is decoded: each object on the way once, for every path through
    it, with the members they do not name skipped. The arguments are JSON the agent sent,
    and decoding them whole would build whatever they hold into objects.
    """
    values: list[Any] = [None] * len(paths)
    if first_byte(arguments) != 0x7B:  # "{": arguments that are not an object hold no value
        return values
    # An explicit stack, as the paths may be as deep as an app's schema.
    pending: list[tuple[bytes | msgspec.Raw, list[int], int]] = [(arguments, list(range(len(paths))), 0)]
    while pending:
        text, through, depth = pending.pop()
        keys = tuple(dict.fromkeys(paths[index][depth] for index in through))
        found = dict(zip(keys, msgspec.structs.astuple(_members_decoder(keys)(text))))
        deeper: dict[str, list[int]] = {}
        for index in through:
            key = paths[index][depth]
            member = found[key]
            if member is msgspec.UNSET:
                continue
            first = first_byte(member)
            if depth + 1 < len(paths[index]):
                if first == 0x7B:  # "{": the path goes on inside it
                    deeper.setdefault(key, []).append(index)
            elif first != 0x7B and first != 0x5B:  # not an object or an array
                values[index] = decode_json(member)
        pending.extend((found[key], group, depth + 1) for key, group in deeper.items())
    return values


def param_header_problem(
    params: tuple[HeaderParam, ...],
    arguments: bytes | msgspec.Raw,
    headers: dict[bytes, bytes],
    repeated: Any,
) -> str | None:
    """Why a tools/call's `Mcp-Param-*` headers disagree with its arguments (a JSON object) (-32020), or None."""
    values = _argument_values([param.path for param in params], arguments)
    for param, value in zip(params, values):
        name = param.header.encode("ascii")
        raw = headers.get(name)
        shown = "Mcp-Param-" + param.header[len("mcp-param-") :]
        if raw is not None and name in repeated:
            return f"{shown} header appears more than once"
        rendered = _render(value) if value is not None else None
        if rendered is None:
            if raw is not None:
                return f"{shown} header is present but its argument {'.'.join(param.path)!r} is absent"
            continue
        if raw is None:
            return f"{shown} header is missing but its argument {'.'.join(param.path)!r} is present"
        try:
            text = raw.decode("ascii").strip(" \t")
        except UnicodeDecodeError:
            return f"{shown} header holds characters outside ASCII: send them base64-wrapped"
        decoded = decode_header_value(text)
        if decoded is None:
            return f"{shown} header has a malformed base64 value"
        if not _matches(param.type, value, rendered, decoded):
            return f"{shown} header does not match its argument {'.'.join(param.path)!r}"
    return None
