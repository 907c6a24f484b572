"""`Mcp-Param-*` headers against a call's arguments (MCP 2026-07-28; docs/protocol.md): decoding and comparing."""

from __future__ import annotations

import base64

import msgspec
import pytest

from clientmcp_fast.core.param_headers import (
    HeaderParam,
    _argument_values,
    decode_header_value,
    header_params,
    param_header_problem,
)

REGION = HeaderParam("mcp-param-region", ("region",), "string")
COUNT = HeaderParam("mcp-param-count", ("count",), "integer")
DRY_RUN = HeaderParam("mcp-param-dry-run", ("dryRun",), "boolean")
NESTED = HeaderParam("mcp-param-zone", ("target", "placement", "zone"), "string")


def problem(params, arguments, headers: dict, repeated=frozenset()):
    encoded = {
        name.encode(): value.encode() if isinstance(value, str) else value for name, value in headers.items()
    }
    return param_header_problem(
        tuple(params), msgspec.json.encode(arguments), encoded, frozenset(n.encode() for n in repeated)
    )


# -- decoding a header value -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["us-west1", "", "42", "true", "a b", "=?base64?abc", "=?BASE64?SGVsbG8=?=", "?="]
)
def test_a_value_without_the_exact_wrapper_is_taken_literally(value):
    assert decode_header_value(value) == value


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?WsO8cmljaA==?=", "Zürich"),
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64??=", ""),
    ],
)
def test_the_base64_sentinel_is_decoded(value, decoded):
    assert decode_header_value(value) == decoded


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8?=",  # missing padding (conformance suite)
        "=?base64?SGVs!!!bG8=?=",  # outside the alphabet (conformance suite)
        "=?base64?SGVsbG9=?=",  # non-zero trailing bits: decodes, but not the canonical spelling
        "=?base64?SGVs bG8=?=",
        "=?base64?SGVsbG8-?=",  # base64url is another alphabet
        "=?base64?/w==?=",  # valid base64 of a byte that is not UTF-8
        "=?base64?SGVsbG8===?=",
    ],
)
def test_a_malformed_sentinel_is_none(value):
    assert decode_header_value(value) is None


def test_a_sentinel_round_trips_any_text():
    text = "line\r\n\t=?base64?x?= ünïcode 世界 "
    assert decode_header_value("=?base64?" + base64.b64encode(text.encode()).decode() + "?=") == text


# -- present and absent ------------------------------------------------------------------------


def test_a_matching_string_header_is_fine():
    assert problem([REGION], {"region": "us-west1"}, {"mcp-param-region": "us-west1"}) is None


def test_a_matching_base64_header_is_fine():
    header = {"mcp-param-region": "=?base64?WsO8cmljaA==?="}
    assert problem([REGION], {"region": "Zürich"}, header) is None


def test_surrounding_whitespace_of_a_header_is_not_part_of_it():
    assert problem([REGION], {"region": "eu"}, {"mcp-param-region": " \teu\t "}) is None


def test_a_different_value_is_a_problem():
    text = problem([REGION], {"region": "us-west1"}, {"mcp-param-region": "eu-west1"})
    assert text == "Mcp-Param-region header does not match its argument 'region'"


def test_a_missing_header_for_a_present_value_is_a_problem():
    text = problem([REGION], {"region": "us-west1"}, {})
    assert text == "Mcp-Param-region header is missing but its argument 'region' is present"


@pytest.mark.parametrize("arguments", [{}, {"region": None}, {"other": "x"}])
def test_a_header_for_an_absent_or_null_value_is_a_problem(arguments):
    text = problem([REGION], arguments, {"mcp-param-region": "us-west1"})
    assert text == "Mcp-Param-region header is present but its argument 'region' is absent"


@pytest.mark.parametrize("arguments", [{}, {"region": None}])
def test_both_absent_is_fine(arguments):
    assert problem([REGION], arguments, {}) is None


def test_a_repeated_header_is_a_problem():
    text = problem([REGION], {"region": "eu"}, {"mcp-param-region": "eu, eu"}, repeated={"mcp-param-region"})
    assert text == "Mcp-Param-region header appears more than once"


def test_another_repeated_header_does_not_matter():
    assert problem([REGION], {"region": "eu"}, {"mcp-param-region": "eu"}, repeated={"accept"}) is None


def test_a_malformed_sentinel_is_a_problem():
    text = problem([REGION], {"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8?="})
    assert text == "Mcp-Param-region header has a malformed base64 value"


def test_a_header_outside_ascii_is_a_problem():
    text = problem([REGION], {"region": "Zürich"}, {"mcp-param-region": "Zürich".encode("latin-1")})
    assert text == "Mcp-Param-region header holds characters outside ASCII: send them base64-wrapped"


def test_unannotated_headers_are_ignored():
    assert problem([REGION], {"region": "eu"}, {"mcp-param-region": "eu", "mcp-param-other": "x"}) is None


def test_no_annotations_means_no_problem():
    assert problem([], {"region": "eu"}, {"mcp-param-region": "elsewhere"}) is None


def test_every_annotation_is_checked():
    headers = {"mcp-param-region": "eu", "mcp-param-count": "3"}
    assert problem([REGION, COUNT], {"region": "eu", "count": 3}, headers) is None
    text = problem([REGION, COUNT], {"region": "eu", "count": 4}, headers)
    assert text == "Mcp-Param-count header does not match its argument 'count'"


def test_arguments_that_are_not_an_object_have_no_values():
    assert problem([REGION], None, {}) is None
    text = problem([REGION], ["eu"], {"mcp-param-region": "eu"})
    assert text == "Mcp-Param-region header is present but its argument 'region' is absent"


# -- integers and booleans ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "header"),
    [
        (42, "42"),
        (42, "42.0"),
        (42, "42.000"),
        (-7, "-7"),
        (42.0, "42"),
        (0, "0"),
        (2**53 - 1, "9007199254740991"),
    ],
)
def test_integers_compare_as_numbers(value, header):
    assert problem([COUNT], {"count": value}, {"mcp-param-count": header}) is None


@pytest.mark.parametrize("header", ["42.5", "43", "4.2e1", "forty-two", "", "42.0.0", "0x2a", "+42"])
def test_an_integer_header_with_another_value_is_a_problem(header):
    text = problem([COUNT], {"count": 42}, {"mcp-param-count": header})
    assert text == "Mcp-Param-count header does not match its argument 'count'"


def test_a_base64_wrapped_integer_is_decoded_before_comparing():
    assert problem([COUNT], {"count": 42}, {"mcp-param-count": "=?base64?NDIuMA==?="}) is None


@pytest.mark.parametrize(("value", "header"), [(True, "true"), (False, "false")])
def test_booleans_render_as_true_and_false(value, header):
    assert problem([DRY_RUN], {"dryRun": value}, {"mcp-param-dry-run": header}) is None


@pytest.mark.parametrize(("value", "header"), [(True, "True"), (True, "1"), (False, "true"), (False, "0")])
def test_a_boolean_header_with_another_spelling_is_a_problem(value, header):
    text = problem([DRY_RUN], {"dryRun": value}, {"mcp-param-dry-run": header})
    assert text == "Mcp-Param-dry-run header does not match its argument 'dryRun'"


def test_false_is_a_value_not_an_absence():
    text = problem([DRY_RUN], {"dryRun": False}, {})
    assert text == "Mcp-Param-dry-run header is missing but its argument 'dryRun' is present"


# -- nested paths ------------------------------------------------------------------------------


def test_a_nested_value_is_found_by_its_path():
    arguments = {"target": {"placement": {"zone": "eu-1"}}, "zone": "elsewhere"}
    assert problem([NESTED], arguments, {"mcp-param-zone": "eu-1"}) is None


def test_a_nested_mismatch_names_the_whole_path():
    arguments = {"target": {"placement": {"zone": "eu-1"}}}
    text = problem([NESTED], arguments, {"mcp-param-zone": "eu-2"})
    assert text == "Mcp-Param-zone header does not match its argument 'target.placement.zone'"


@pytest.mark.parametrize(
    "arguments", [{}, {"target": None}, {"target": "eu-1"}, {"target": {"placement": []}}]
)
def test_a_broken_nested_path_is_an_absent_value(arguments):
    assert problem([NESTED], arguments, {}) is None
    text = problem([NESTED], arguments, {"mcp-param-zone": "eu-1"})
    assert text == "Mcp-Param-zone header is present but its argument 'target.placement.zone' is absent"


def test_annotations_from_a_schema_are_checked_end_to_end():
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "type": "object",
                "properties": {"Region": {"type": "string", "x-mcp-header": "Region"}},
            },
            "count": {"type": "integer", "x-mcp-header": "COUNT"},
        },
    }
    params = header_params(schema)
    assert sorted(p.header for p in params) == ["mcp-param-count", "mcp-param-region"]
    arguments = {"target": {"Region": "eu"}, "count": 2}
    assert problem(params, arguments, {"mcp-param-region": "eu", "mcp-param-count": "2"}) is None
    assert problem(params, arguments, {"mcp-param-region": "eu"}) is not None


# -- what is decoded: only the members the annotated paths name --------------------------------


def _walked(paths, arguments):
    """The old reading, for reference: the arguments decoded whole, then each path walked."""
    values = []
    for path in paths:
        value = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value if isinstance(value, (str, int, float, bool)) else None)
    return values


def test_each_path_reads_what_decoding_the_arguments_whole_would():
    import random

    rnd = random.Random(4)
    keys = ["a", "b", "c", "a b", "é", ""]
    leaves = ["x", "", 0, -7, 2.5, True, False, None, [], ["a"], {}, {"a": 1}]

    def value(depth):
        if depth > 3 or rnd.random() < 0.4:
            return rnd.choice(leaves)
        return {rnd.choice(keys): value(depth + 1) for _ in range(rnd.randrange(5))}

    for _ in range(2000):
        arguments = value(0) if rnd.random() < 0.95 else rnd.choice(leaves)
        paths = [tuple(rnd.choice(keys) for _ in range(rnd.randint(1, 4))) for _ in range(rnd.randint(1, 5))]
        got = _argument_values(paths, msgspec.json.encode(arguments))
        assert got == _walked(paths, arguments), (paths, arguments)
        assert [type(v) for v in got] == [type(v) for v in _walked(paths, arguments)]


def test_members_no_path_names_are_skipped_not_built():
    import tracemalloc

    big = b"[" + b",".join([b"[]"] * 1_000_000) + b"]"
    arguments = b'{"other":' + big + b',"target":{"more":' + big + b',"zone":"eu"},"region":"us"}'
    tracemalloc.start()
    try:
        values = _argument_values([("region",), ("target", "zone"), ("target", "none")], arguments)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert values == ["us", "eu", None]
    # Built, the two members would be two million lists (over 100 MB): none is made.
    assert peak < 1_000_000, peak
    # A member a path names but that is an array or an object is not decoded either.
    assert _argument_values([("other",)], arguments) == [None]
