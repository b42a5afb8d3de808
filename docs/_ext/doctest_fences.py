"""A griffe extension for the documentation site (mkdocs.yml loads it; not part of the library).

Google-style docstrings hold doctests inside an ``Examples:`` section, which mkdocstrings renders as code.
jaxcore's family ``__init__`` docstrings also show the family's workflow as a bare ``>>>`` block in the
description; Markdown would read those lines as block quotes (and ``x[d["a"]]`` as a reference link). This
extension wraps every such unindented run of ``>>>`` / ``...`` lines and their output in a ``pycon`` fence,
so it renders as the code it is. Indented blocks (inside sections) are left to the docstring parser.
It also turns Sphinx roles (``:func:`dlip```) into inline code, which Markdown would otherwise print as is,
joins an ``Args:`` item whose names run over two lines (``a, b,`` / ``c: ...``), and renders a ``Raises:``
section written as prose (``As :func:`snore`.``, which has no ``Exception: description`` items) as a
paragraph rather than dropping it.
"""

from __future__ import annotations

import re

from griffe import Extension, Object

_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|obj|exc|const):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """Return ``text`` with each unindented doctest block wrapped in a ```` ```pycon ```` fence."""
    lines = text.split("\n")
    out: list[str] = []
    i, in_fence = 0, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith(">>>"):
            if out and out[-1].strip():
                out.append("")
            out.append("```pycon")
            while i < len(lines) and lines[i].strip() and not lines[i].startswith((" ", "\t")) \
                    and not _SECTION.match(lines[i]):
                out.append(lines[i])
                i += 1
            out.append("```")
            if i < len(lines) and lines[i].strip():
                out.append("")
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


_ITEM = re.compile(r"^    [A-Za-z_*][\w.*]*(\s*,\s*[A-Za-z_*][\w.*]*)*\s*:")
_ARGS = ("Args:", "Arguments:", "Parameters:")


def fix_sections(text: str) -> str:
    """Join two-line ``Args`` names; turn a ``Raises:`` section of prose into a paragraph."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() in _ARGS and not line.startswith(" "):
            out.append(line)
            i += 1
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
                cur = lines[i]
                if (cur.startswith("    ") and not cur.startswith("     ") and cur.rstrip().endswith(",")
                        and ":" not in cur and i + 1 < len(lines) and lines[i + 1].startswith("    ")):
                    lines[i + 1] = cur.rstrip() + " " + lines[i + 1].strip()
                    lines[i + 1] = "    " + lines[i + 1].lstrip()
                else:
                    out.append(cur)
                i += 1
            continue
        if line.strip() == "Raises:" and not line.startswith(" "):
            j = i + 1
            body = []
            while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                body.append(lines[j])
                j += 1
            items = [b for b in body if b.startswith("    ") and not b.startswith("     ")]
            if items and not all(_ITEM.match(b) for b in items):
                while body and not body[-1].strip():
                    body.pop()
                out.append("**Raises:** " + " ".join(b.strip() for b in body))
                out.append("")
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestFences(Extension):
    """Fence the bare doctest blocks of every loaded object's docstring."""

    def on_instance(self, *, obj: Object, **kwargs) -> None:  # noqa: D102
        doc = obj.docstring
        if doc is None:
            return
        value = fix_sections(_ROLE.sub(r"`\1`", doc.value))
        if ">>>" in value:
            value = fence_doctests(value)
        doc.value = value
