"""The public API of every family, listed in one place so that a rename is deliberate.

Each exported name of ``jaxcore.<family>`` (its ``__all__``) is rendered as its kind and signature
(parameter names, kinds and defaults; annotations left out, since their text varies across Python and
jaxtyping versions). The snapshot is ``tests/public_api.txt``; after a deliberate change regenerate it:

    python tests/test_public_api.py --update
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pathlib
import sys

import pytest

FAMILIES = ("", "tpp", "causal", "bnp", "inverse", "ipm", "sam", "lm", "watermark", "effects", "graphs", "rl",
            "datasets", "alignment", "decoding", "trees", "acoustics", "finegrained", "geometry", "evals")  # "": the top-level package
SNAPSHOT = pathlib.Path(__file__).with_name("public_api.txt")


def _params(obj) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parts, kind_seen = [], None
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and kind_seen not in (p.KEYWORD_ONLY, p.VAR_POSITIONAL):
            parts.append("*")
        if p.kind is p.POSITIONAL_ONLY:
            text = p.name
        elif p.kind is p.VAR_POSITIONAL:
            text = "*" + p.name
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
        else:
            text = p.name
        if p.default is not p.empty:
            default = p.default
            if callable(default) and hasattr(default, "__name__"):
                shown = default.__name__
            elif isinstance(default, enum.Enum):
                shown = str(default)
            else:
                shown = repr(default)
                if " at 0x" in shown:
                    shown = type(default).__name__ + "(...)"
            text += "=" + shown
        parts.append(text)
        kind_seen = p.kind
    return "(" + ", ".join(parts) + ")"


def _describe(name: str, obj) -> list[str]:
    if inspect.isclass(obj):
        if issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return [f"namedtuple {name}({', '.join(obj._fields)})"]
        if issubclass(obj, BaseException):
            return [f"exception {name}"]
        lines = [f"class {name}{_params(obj)}"]
        for attr, value in sorted(vars(obj).items()):
            if attr.startswith("_"):
                continue
            fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if inspect.isfunction(fn):
                kind = "classmethod" if isinstance(value, classmethod) else \
                    "staticmethod" if isinstance(value, staticmethod) else "method"
                lines.append(f"  {kind} {name}.{attr}{_params(fn)}")
            elif isinstance(value, property):
                lines.append(f"  property {name}.{attr}")
        return lines
    if callable(obj):
        return [f"function {name}{_params(obj)}"]
    return [f"constant {name}: {type(obj).__name__}"]


def render() -> str:
    out = []
    for family in FAMILIES:
        module = importlib.import_module(f"jaxcore.{family}".rstrip("."))
        names = getattr(module, "__all__", None)
        out.append(f"[jaxcore.{family}]".replace(".]", "]"))
        if names is None:
            out.append("  (no __all__)")
            continue
        for name in sorted(names):
            out.extend(_describe(name, getattr(module, name)))
        out.append("")
    return "\n".join(out)


def test_every_family_has_all():
    for family in FAMILIES:
        module = importlib.import_module(f"jaxcore.{family}".rstrip("."))
        assert hasattr(module, "__all__"), f"{module.__name__} has no __all__"
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{module.__name__}.__all__ names missing attributes: {missing}"


def test_public_api_matches_snapshot():
    current = render()
    recorded = SNAPSHOT.read_text() if SNAPSHOT.exists() else ""
    if current.strip() != recorded.strip():
        import difflib

        diff = "\n".join(difflib.unified_diff(recorded.splitlines(), current.splitlines(),
                                              "tests/public_api.txt", "current", lineterm="", n=1))
        pytest.fail("the public API changed; if deliberate, run `python tests/test_public_api.py --update`\n"
                    + diff)


if __name__ == "__main__":
    if "--update" in sys.argv:
        SNAPSHOT.write_text(render() + "\n")
        print(f"wrote {SNAPSHOT}")
    else:
        print(render())
