"""Register validation (ClientMCP v1 §3.2, docs/protocol.md): each rejection, its reason, and what passes through."""

from __future__ import annotations

import gc
import json
import weakref

import pytest

from clientmcp_fast.core.limits import MAX_CLOSE_REASON_BYTES
from clientmcp_fast.core.messages import decode_app_message
from clientmcp_fast.core.register import EMPTY_TOOLSET, RegisterError, ToolSet, parse_register


def parse(message, max_tools: int = 1000) -> ToolSet:
    """The tool set of a register message given as a dict (sent as JSON) or as raw bytes."""
    raw = message if isinstance(message, bytes) else json.dumps(message).encode()
    decoded = decode_app_message(raw)
    return parse_register(decoded.tools, decoded.instructions, max_tools)


def reason(message, max_tools: int = 1000) -> str:
    with pytest.raises(RegisterError) as caught:
        parse(message, max_tools)
    return str(caught.value)


def tools(*declared) -> dict:
    return {"type": "register", "tools": list(declared)}


def tool(name="t", schema=None, **extra) -> dict:
    return {"name": name, "inputSchema": {"type": "object"} if schema is None else schema, **extra}


def with_properties(properties: dict, name: str = "t") -> dict:
    return tools(tool(name, {"type": "object", "properties": properties}))


# -- the tools array --------------------------------------------------------------------------


def test_tools_missing_is_refused():
    assert reason({"type": "register"}) == "register: tools is missing"


@pytest.mark.parametrize("value", [{}, "tools", None, 5, True])
def test_tools_not_an_array_is_refused(value):
    assert reason({"type": "register", "tools": value}) == "register: tools must be an array"


def test_an_empty_tools_array_is_accepted():
    toolset = parse(tools())
    assert toolset.tools == {}
    assert toolset.tools_json == b"[]"
    assert toolset.instructions is None


@pytest.mark.parametrize("element", [5, "t", None, [], True])
def test_an_element_that_is_not_an_object_is_refused(element):
    assert reason(tools(tool("a"), element)) == "tools[1]: not an object"


def test_more_tools_than_the_limit_are_refused():
    declared = [tool(f"t{i}") for i in range(4)]
    assert reason(tools(*declared), max_tools=3) == "register: 4 tools, over the limit of 3"


def test_exactly_the_limit_of_tools_is_accepted():
    declared = [tool(f"t{i}") for i in range(3)]
    assert list(parse(tools(*declared), max_tools=3).tools) == ["t0", "t1", "t2"]


def test_the_default_limit_is_a_thousand_tools():
    assert len(parse(tools(*(tool(f"t{i}") for i in range(1000)))).tools) == 1000
    with pytest.raises(RegisterError, match="^register: 1001 tools, over the limit of 1000$"):
        parse(tools(*(tool(f"t{i}") for i in range(1001))))


# -- names ------------------------------------------------------------------------------------


def test_a_missing_name_is_refused():
    assert reason(tools({"inputSchema": {"type": "object"}})) == "tools[0]: name is missing"


@pytest.mark.parametrize("name", [5, None, ["a"], {"n": "a"}, True])
def test_a_name_that_is_not_a_string_is_refused(name):
    assert reason(tools(tool("ok"), tool(name))) == "tools[1]: name must be a string"


def test_an_empty_name_is_refused():
    assert reason(tools(tool(""))) == 'tools[0] "": name must be 1-128 characters'


def test_a_129_character_name_is_refused():
    assert reason(tools(tool("n" * 129))) == f'tools[0] "{"n" * 40}": name must be 1-128 characters'


def test_a_128_character_name_is_accepted():
    assert list(parse(tools(tool("n" * 128))).tools) == ["n" * 128]


def test_every_name_character_is_accepted():
    name = "ABCXYZabcxyz0189_-."
    assert list(parse(tools(tool(name))).tools) == [name]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("a b", '"a b"'),
        ("a/b", '"a/b"'),
        ("café", '"café"'),
        ("a\nb", '"a\\nb"'),
        ("a:b", '"a:b"'),
        ("a@b", '"a@b"'),
    ],
)
def test_a_name_with_invalid_characters_is_refused(name, shown):
    declared = [tool("zero"), tool("one"), tool("two"), tool(name)]
    assert reason(tools(*declared)) == f"tools[3] {shown}: name has invalid characters"


def test_the_spec_example_reason():
    declared = [tool("a"), tool("b"), tool("c"), tool("a b")]
    assert reason(tools(*declared)) == 'tools[3] "a b": name has invalid characters'


def test_a_name_declared_twice_is_refused():
    assert reason(tools(tool("x"), tool("y"), tool("x"))) == 'tools[2] "x": name declared twice'


def test_names_differing_only_in_case_are_distinct():
    assert list(parse(tools(tool("x"), tool("X"))).tools) == ["x", "X"]


# -- inputSchema ------------------------------------------------------------------------------


def test_a_missing_input_schema_is_refused():
    assert reason(tools({"name": "t"})) == 'tools[0] "t": inputSchema is missing'


@pytest.mark.parametrize("schema", ["object", [], None, 5, True])
def test_an_input_schema_that_is_not_an_object_is_refused(schema):
    assert (
        reason(tools({"name": "t", "inputSchema": schema})) == 'tools[0] "t": inputSchema must be an object'
    )


@pytest.mark.parametrize(
    "schema",
    [{}, {"type": "string"}, {"type": ["object"]}, {"type": "Object"}, {"type": None}, {"properties": {}}],
)
def test_an_input_schema_without_type_object_is_refused(schema):
    assert reason(tools(tool("t", schema))) == 'tools[0] "t": inputSchema needs "type": "object"'


def test_the_first_bad_tool_is_the_one_named():
    declared = [tool("good"), tool("bad name"), tool("also bad")]
    assert reason(tools(*declared)) == 'tools[1] "bad name": name has invalid characters'


# -- x-mcp-header annotations: MCP 2026-07-28, basic/transports -------------------------------


@pytest.mark.parametrize("header", ["", "a b", "Région", "a:b", "a\r\nb", "(x)", 5, None, ["Region"]])
def test_an_annotation_that_is_not_an_http_token_is_refused(header):
    problem = reason(with_properties({"region": {"type": "string", "x-mcp-header": header}}))
    assert problem == "tools[0] \"t\": x-mcp-header of 'region' is not an HTTP token"


def test_every_token_character_is_accepted():
    token = "!#$%&'*+-.^_`|~09AZaz"
    params = parse(with_properties({"p": {"type": "string", "x-mcp-header": token}})).tools["t"].header_params
    assert [p.header for p in params] == ["mcp-param-" + token.lower()]


def test_an_annotation_declared_twice_case_insensitively_is_refused():
    problem = reason(
        with_properties(
            {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "region"},
            }
        )
    )
    assert problem.startswith('tools[0] "t": x-mcp-header ')
    assert problem.endswith(" is declared twice")
    assert problem.lower().count("region") == 1


@pytest.mark.parametrize(
    "prop_type", ["number", "array", "object", "null", ["string", "null"], ["integer"], None, "String"]
)
def test_an_annotation_on_a_type_other_than_string_integer_boolean_is_refused(prop_type):
    schema = (
        {"x-mcp-header": "Region"} if prop_type is None else {"type": prop_type, "x-mcp-header": "Region"}
    )
    problem = reason(with_properties({"region": schema}))
    assert problem == "tools[0] \"t\": x-mcp-header of 'region' needs type string, integer or boolean"


@pytest.mark.parametrize("prop_type", ["string", "integer", "boolean"])
def test_an_annotation_on_string_integer_or_boolean_is_accepted(prop_type):
    toolset = parse(with_properties({"region": {"type": prop_type, "x-mcp-header": "Region"}}))
    (param,) = toolset.tools["t"].header_params
    assert (param.header, param.path, param.type) == ("mcp-param-region", ("region",), prop_type)


def test_an_annotation_on_the_root_schema_is_refused():
    schema = {"type": "object", "x-mcp-header": "Root"}
    problem = reason(tools(tool("t", schema)))
    assert problem == 'tools[0] "t": x-mcp-header is only allowed on a property reached through properties'


ANNOTATED = {"type": "string", "x-mcp-header": "Region"}


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"list": {"type": "array", "items": ANNOTATED}}},
        {"properties": {"list": {"type": "array", "prefixItems": [ANNOTATED]}}},
        {"properties": {"list": {"type": "array", "contains": ANNOTATED}}},
        {"properties": {"a": {"anyOf": [ANNOTATED]}}},
        {"properties": {"a": {"oneOf": [ANNOTATED]}}},
        {"properties": {"a": {"allOf": [ANNOTATED]}}},
        {"properties": {"a": {"not": ANNOTATED}}},
        {"anyOf": [{"type": "object", "properties": {"a": ANNOTATED}}]},
        {"if": ANNOTATED},
        {"then": {"properties": {"a": ANNOTATED}}},
        {"else": ANNOTATED},
        {"$defs": {"region": ANNOTATED}, "properties": {"a": {"$ref": "#/$defs/region"}}},
        {"definitions": {"region": ANNOTATED}},
        {"additionalProperties": ANNOTATED},
        {"patternProperties": {"^r": ANNOTATED}},
        {"dependentSchemas": {"a": {"properties": {"b": ANNOTATED}}}},
        {"propertyNames": ANNOTATED},
        {"unevaluatedProperties": ANNOTATED},
    ],
    ids=[
        "items",
        "prefixItems",
        "contains",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "root-anyOf",
        "if",
        "then",
        "else",
        "$defs",
        "definitions",
        "additionalProperties",
        "patternProperties",
        "dependentSchemas",
        "propertyNames",
        "unevaluatedProperties",
    ],
)
def test_an_annotation_reached_through_anything_but_properties_is_refused(schema):
    problem = reason(tools(tool("t", {"type": "object", **schema})))
    assert problem == 'tools[0] "t": x-mcp-header is only allowed on a property reached through properties'


def test_an_annotation_on_nested_properties_is_accepted():
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            },
            "count": {"type": "integer", "x-mcp-header": "Count"},
        },
    }
    params = parse(tools(tool("t", schema))).tools["t"].header_params
    assert sorted((p.header, p.path, p.type) for p in params) == [
        ("mcp-param-count", ("count",), "integer"),
        ("mcp-param-region", ("target", "region"), "string"),
    ]


def test_properties_named_like_keywords_are_still_properties():
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "string", "x-mcp-header": "Items"},
            "properties": {"type": "string", "x-mcp-header": "Props"},
        },
    }
    params = parse(tools(tool("t", schema))).tools["t"].header_params
    assert sorted(p.path for p in params) == [("items",), ("properties",)]


@pytest.mark.parametrize("keyword", ["default", "const", "examples", "enum"])
def test_annotation_like_data_is_not_an_annotation(keyword):
    data = {"x-mcp-header": "not a token", "type": "number"}
    value = [data] if keyword in ("examples", "enum") else data
    schema = {"type": "object", "properties": {"a": {"type": "object", keyword: value}}}
    assert parse(tools(tool("t", schema))).tools["t"].header_params == ()


def test_an_annotation_names_its_tool_by_index():
    bad = tool("second", {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}})
    problem = reason(tools(tool("first"), bad))
    assert problem == "tools[1] \"second\": x-mcp-header of 'n' needs type string, integer or boolean"


def test_an_annotation_deep_in_nested_properties_is_found():
    depth = 400  # about as deep as msgspec decodes; deeper messages are refused (test_channel.py)
    schema = (
        b'{"type":"object","properties":{"p":' * depth
        + b'{"type":"string","x-mcp-header":"Deep"}'
        + b"}}" * depth
    )
    message = b'{"type":"register","tools":[{"name":"t","inputSchema":' + schema + b"}]}"
    (param,) = parse(message).tools["t"].header_params
    assert param.path == ("p",) * depth
    assert param.header == "mcp-param-deep"


# -- instructions -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 5, [], {}, True])
def test_instructions_that_are_not_a_string_are_refused(value):
    message = {**tools(tool("t")), "instructions": value}
    assert reason(message) == "register: instructions must be a string"


def test_absent_instructions_clear_them():
    assert parse(tools(tool("t"))).instructions is None


@pytest.mark.parametrize("value", ["", "Alice's wallet. Amounts are decimal strings in ETH.", "世界\n"])
def test_string_instructions_are_kept(value):
    assert parse({**tools(), "instructions": value}).instructions == value


# -- ClientMCP v1 §3.2: what passes through ---------------------------------------------------


def test_unknown_members_pass_through_byte_for_byte():
    first = (
        b'{ "name" : "getBalance",\n  "title":"Balance \\u00e9", "icons":[{"src":"x"}],'
        b' "inputSchema":{"type":"object","properties":{"chainId":{"type":"integer"}}},'
        b' "outputSchema" : {"type":"object"}, "annotations":{"readOnlyHint":true},'
        b' "_meta":{"io.github.clientmcp/risk":"observe"}, "future": [1, 2.50, null] }'
    )
    second = b'{"inputSchema":{"type":"object"},"name":"b","description":"caf\xc3\xa9"}'
    message = b'{"type":"register","tools":[ ' + first + b" ,\n" + second + b"  ]}"
    toolset = parse(message)
    assert list(toolset.tools) == ["getBalance", "b"]
    assert toolset.tools_json == b"[" + first + b"," + second + b"]"


def test_declared_order_is_kept():
    names = ["zeta", "alpha", "mid", "Beta", "_x"]
    toolset = parse(tools(*(tool(n) for n in names)))
    assert list(toolset.tools) == names
    assert [t["name"] for t in json.loads(toolset.tools_json)] == names


def test_same_tools_compares_the_declared_tools():
    a = parse(tools(tool("a"), tool("b")))
    assert a.same_tools(parse(tools(tool("a"), tool("b"))))
    # Instructions are not tools: a change of instructions alone announces nothing.
    assert a.same_tools(parse({**tools(tool("a"), tool("b")), "instructions": "new"}))
    assert not a.same_tools(parse(tools(tool("b"), tool("a"))))
    assert not a.same_tools(parse(tools(tool("a"))))
    assert not a.same_tools(parse(tools(tool("a"), tool("b", description="changed"))))
    assert not a.same_tools(None)
    assert not a.same_tools(EMPTY_TOOLSET)
    assert parse(tools()).same_tools(EMPTY_TOOLSET)


# -- docs/protocol.md, Close codes: a reason fits a close frame and still names the problem ---

LONG = "ü" * 200  # two UTF-8 bytes per character


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (tools(*(tool(f"t{i}") for i in range(999)), tool("世" * 128)), "name has invalid characters"),
        (tools(tool(LONG)), "name must be 1-128 characters"),
        (tools(tool("a" * 128), tool("a" * 128)), "name declared twice"),
        (tools(tool("n" * 128, [])), "inputSchema must be an object"),
        (tools(tool("n" * 128, {"type": "array"})), 'inputSchema needs "type": "object"'),
        (
            tools(
                tool(
                    "n" * 128,
                    {"type": "object", "properties": {LONG: {"type": "number", "x-mcp-header": "A"}}},
                )
            ),
            "needs type string, integer or boolean",
        ),
        (
            tools(
                tool(
                    "n" * 128,
                    {"type": "object", "properties": {LONG: {"type": "string", "x-mcp-header": LONG}}},
                )
            ),
            "is not an HTTP token",
        ),
        (
            tools(
                tool(
                    "n" * 128,
                    {
                        "type": "object",
                        "properties": {
                            "a": {"type": "string", "x-mcp-header": "H" * 200},
                            "b": {"type": "string", "x-mcp-header": "h" * 200},
                        },
                    },
                )
            ),
            "is declared twice",
        ),
        (
            tools(tool("n" * 128, {"type": "object", "properties": {"a": {"items": ANNOTATED}}})),
            "is only allowed on a property reached through properties",
        ),
    ],
    ids=[
        "cjk-name",
        "long-name",
        "duplicate",
        "schema-not-object",
        "schema-type",
        "header-type",
        "header-token",
        "header-twice",
        "header-path",
    ],
)
def test_every_reason_fits_a_close_frame_and_names_the_problem(message, problem):
    text = reason(message)
    assert len(text.encode("utf-8")) <= MAX_CLOSE_REASON_BYTES, text
    assert text.endswith(problem), text
    assert text.startswith("tools[")


# -- one tool set for every app that declares the same tools -------------------------------------


def test_the_same_register_gives_the_same_tool_set_object():
    first = parse(tools(tool("a"), tool("b")))
    assert parse(tools(tool("a"), tool("b"))) is first


def test_registers_that_differ_in_any_way_get_their_own_tool_sets():
    base = parse(tools(tool("a")))
    assert parse({**tools(tool("a")), "instructions": "x"}) is not base
    assert parse(tools(tool("a")), max_tools=1) is not base
    compact = parse(b'{"type":"register","tools":[{"name":"a","inputSchema":{"type":"object"}}]}')
    spaced = parse(b'{"type":"register","tools":[ {"name":"a","inputSchema":{"type":"object"}} ]}')
    assert spaced is not compact and spaced.same_tools(compact)


def test_a_refused_register_is_refused_every_time():
    message = tools(tool("a"), tool("a"))
    assert reason(message) == reason(message) == 'tools[1] "a": name declared twice'


def test_a_shared_tool_set_is_not_kept_once_no_app_holds_it():
    toolset = parse(tools(tool("only-here")))
    held = weakref.ref(toolset)
    del toolset
    gc.collect()
    assert held() is None
