"""Small grammars written as regular expressions, for :func:`~jaxcore.lm.compile_regex`.

Numbers (JSON's), the ``@name[value]`` closed-form answer format of InfiAgent-DABench, and JSON objects with
a fixed flat schema: each function returns a pattern string that :func:`~jaxcore.lm.compile_regex` turns into a
token automaton and :class:`~jaxcore.lm.GrammarConstraint` enforces during :func:`~jaxcore.lm.generate`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from .._util.checks import check_bool, check_choice, expected

__all__ = ["answer_regex", "json_regex", "number_regex"]

_INTEGER = r"-?(0|[1-9][0-9]*)"
_NUMBER = _INTEGER + r"(\.[0-9]+)?([eE][+-]?[0-9]+)?"
_DECIMAL = _INTEGER + r"(\.[0-9]+)?"
_STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'


def number_regex(kind: Literal["integer", "decimal", "number"] = "number") -> str:
    """A regular expression of a JSON-style number.

    ``"integer"``: ``-?(0|[1-9][0-9]*)``; ``"decimal"``: an integer with an optional fraction
    ``.[0-9]+``; ``"number"``: a decimal with an optional exponent ``[eE][+-]?[0-9]+`` (JSON's number).

    Args:
        kind: ``"integer"``, ``"decimal"`` or ``"number"``.

    Returns:
        The pattern (str).

    Raises:
        ValueError: another kind.

    Examples:
        >>> import re
        >>> [bool(re.fullmatch(number_regex("decimal"), s)) for s in ["-0.5", "01", "3.", "42"]]
        [True, False, False, True]
    """
    check_choice(kind, "kind", ("integer", "decimal", "number"))
    return {"integer": _INTEGER, "decimal": _DECIMAL, "number": _NUMBER}[kind]


def answer_regex(names: Sequence[str], value: str | Sequence[str] | None = None, *,
                 separator: str = r"(, |\n| )") -> str:
    """The closed-form answer format of InfiAgent-DABench: ``@name1[value1]<sep>@name2[value2]...``.

    Names appear literally, in the given order; each value matches ``value`` (default
    ``[^\\]\\n]+``: one or more characters other than ``]`` and a newline, so that the official
    parser ``@(\\w+)\\[(.*?)\\]`` reads each value back whole).

    Args:
        names: the answer names (non-empty ``\\w+`` strings), at least one.
        value: a pattern for every value, or one per name (e.g. ``number_regex("decimal")``).
        separator: the pattern between two answers.

    Returns:
        The pattern (str).

    Raises:
        TypeError: names or values that are not str. ValueError: no names, a name that is not
            ``\\w+``, a value count unlike the name count, an invalid value or separator pattern.

    References:
        Hu et al., "InfiAgent-DABench: Evaluating Agents on Data Analysis Tasks", ICML 2024.

    Examples:
        >>> import re
        >>> p = answer_regex(["mean_fare", "count"], [number_regex("decimal"), number_regex("integer")])
        >>> bool(re.fullmatch(p, "@mean_fare[34.65], @count[891]")), bool(re.fullmatch(p, "@count[891]"))
        (True, False)
    """
    if isinstance(names, str) or not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise TypeError(expected("names", "a sequence of str", type(names).__name__, raw=True))
    if not names:
        raise ValueError(expected("names", "at least one answer name", "an empty sequence", raw=True))
    bad = next((n for n in names if not re.fullmatch(r"\w+", n)), None)
    if bad is not None:
        raise ValueError(expected("names", r"names matching \w+", bad))
    if value is None:
        values = [r"[^\]\n]+"] * len(names)
    elif isinstance(value, str):
        values = [value] * len(names)
    elif isinstance(value, Sequence) and all(isinstance(x, str) for x in value):
        values = list(value)
        if len(values) != len(names):
            raise ValueError(expected("value", f"one pattern per name ({len(names)})", f"{len(values)} patterns",
                                      raw=True))
    else:
        raise TypeError(expected("value", "a str pattern or a sequence of them", type(value).__name__, raw=True))
    if not isinstance(separator, str):
        raise TypeError(expected("separator", "a str pattern", type(separator).__name__, raw=True))
    for what, p in [("value", x) for x in values] + [("separator", separator)]:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(expected(what, "a valid regular expression", f"{p!r} ({exc})", raw=True)) from exc
    parts = [rf"@{re.escape(n)}\[({v})\]" for n, v in zip(names, values)]
    return f"({separator})".join(parts)


_JSON_TYPES = {"string": _STRING, "integer": _INTEGER, "number": _NUMBER, "boolean": r"(true|false)", "null": "null"}


def json_regex(schema: Mapping, *, whitespace: bool = True) -> str:
    """A regular expression of a JSON object with a fixed flat schema (keys in order, all present).

    ``schema`` maps each key to a type (``"string"``, ``"integer"``, ``"number"``, ``"boolean"``,
    ``"null"``, or a list of allowed string values, an enum); a JSON Schema object
    ``{"type": "object", "properties": {key: {"type": ...} or {"enum": [...]}}}`` is read the same
    way. Strings follow JSON's escapes; with ``whitespace`` a single optional space may follow
    ``{``, ``:`` and ``,`` and precede ``}``.

    Args:
        schema: the flat schema (at least one key; keys are str).
        whitespace: allow the optional single spaces.

    Returns:
        The pattern (str); every match is valid JSON that ``json.loads`` reads into a dict with
        exactly these keys, in order.

    Raises:
        TypeError: a schema that is not a mapping, a non-str key. ValueError: no keys, an unknown
            type, nested objects or arrays, an empty enum.

    Examples:
        >>> import re
        >>> p = json_regex({"name": "string", "age": "integer", "ok": "boolean"})
        >>> bool(re.fullmatch(p, '{"name": "Ann", "age": 41, "ok": true}'))
        True
        >>> bool(re.fullmatch(p, '{"age": 41, "name": "Ann", "ok": true}'))
        False
    """
    if not isinstance(schema, Mapping):
        raise TypeError(expected("schema", "a mapping of keys to types", type(schema).__name__, raw=True))
    props = schema
    if schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping):
        props = schema["properties"]
    if not props:
        raise ValueError(expected("schema", "at least one key", schema))
    check_bool(whitespace, "whitespace")
    sp = "[ ]?" if whitespace else ""
    fields = []
    for key, typ in props.items():
        if not isinstance(key, str):
            raise TypeError(expected("schema", "str keys", type(key).__name__, raw=True))
        if isinstance(typ, Mapping):
            typ = typ.get("enum", typ.get("type"))
        if isinstance(typ, (list, tuple)):
            if not typ or not all(isinstance(x, str) for x in typ):
                raise ValueError(expected(f"schema[{key!r}]", "a non-empty enum of str", typ))
            body = "(" + "|".join(re.escape(_json_string(x)) for x in typ) + ")"
        elif isinstance(typ, str) and typ in _JSON_TYPES:
            body = _JSON_TYPES[typ]
        else:
            raise ValueError(expected(f"schema[{key!r}]", f"one of {sorted(_JSON_TYPES)} or an enum list", typ))
        fields.append(re.escape(_json_string(key)) + sp + ":" + sp + "(" + body + ")")
    return r"\{" + sp + ("," + sp).join(fields) + sp + r"\}"


def _json_string(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=True)
