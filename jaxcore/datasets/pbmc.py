"""10x PBMC 68k (reduced): 700 blood cells x 765 genes with 10 cell-type labels, from scanpy's wheel.

scanpy ships ``scanpy/datasets/10x_pbmc68k_reduced.h5ad`` (a processed subset of Zheng et al. 2017's
68k PBMCs: log-normalised, scaled expression of 765 highly variable genes; 50 PCA coordinates; the
``bulk_labels`` cell types). The wheel alone is fetched into the jaxcore cache (scanpy need not be
installed), both digests are checked, and the file is read with h5py (the ``data`` extra).

Cell types (fine labels, in the file's order) and the coarse lineage grouping used here:

====  ===============================  ======  ==================
fine  cell type                        cells   coarse
====  ===============================  ======  ==================
0     CD4+/CD25 T Reg                  68      0 T cells
1     CD4+/CD45RA+/CD25- Naive T       8       0 T cells
2     CD4+/CD45RO+ Memory              19      0 T cells
3     CD8+ Cytotoxic T                 54      0 T cells
4     CD8+/CD45RA+ Naive Cytotoxic     43      0 T cells
5     CD14+ Monocyte                   129     1 myeloid
6     CD19+ B                          95      2 B cells
7     CD34+                            13      4 CD34+ progenitors
8     CD56+ NK                         31      3 NK cells
9     Dendritic                        240     1 myeloid
====  ===============================  ======  ==================

(T cells, myeloid cells and the three single-type lineages: the lymphoid/myeloid split of
haematopoiesis.) The counts are checked when the file is converted.
"""

from __future__ import annotations

import numpy as np

from ._files import DataUnavailableError, cached_arrays, wheel_file

__all__ = ["PBMC_COARSE_NAMES", "PBMC_FINE_NAMES", "PBMC_FINE_TO_COARSE", "load_pbmc68k"]

SCANPY_VERSION = "1.11.5"
SCANPY_SHA256 = "fcd383ddcf7acbf7c0ca232c25ad51b00aec9f8d2f7c8954b8c6ee0962257166"
_MEMBER = "scanpy/datasets/10x_pbmc68k_reduced.h5ad"
_MEMBER_SHA256 = "e71d41e737c941559b7c57c9243bdb3d2c889c2adfdf00e3422ac6b46783676f"

#: The 10 cell types (fine labels 0..9), in the file's category order.
PBMC_FINE_NAMES = (
    "CD4+/CD25 T Reg", "CD4+/CD45RA+/CD25- Naive T", "CD4+/CD45RO+ Memory", "CD8+ Cytotoxic T",
    "CD8+/CD45RA+ Naive Cytotoxic", "CD14+ Monocyte", "CD19+ B", "CD34+", "CD56+ NK", "Dendritic",
)
#: The 5 coarse lineages (coarse labels 0..4).
PBMC_COARSE_NAMES = ("T cells", "myeloid", "B cells", "NK cells", "CD34+ progenitors")
#: Coarse lineage of each cell type.
PBMC_FINE_TO_COARSE = np.array([0, 0, 0, 0, 0, 1, 2, 4, 3, 1], np.int32)
_COUNTS = np.array([68, 8, 19, 54, 43, 129, 95, 13, 31, 240])


def load_pbmc68k(*, representation: str = "genes",
                 allow_download: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 700 PBMC cells: features, cell types (10) and coarse lineages (5, see the module docstring).

    Args:
        representation: ``"genes"`` (the file's ``X``: scaled log-expression of 765 genes) or
            ``"pca"`` (its 50 PCA coordinates, ``obsm/X_pca``).
        allow_download: if False, only the cache is consulted.

    Returns:
        ``(x, fine, coarse)``: x ``[700, 765]`` (or ``[700, 50]``) float32; fine ``[700]`` int32 in 0..9
        (:data:`PBMC_FINE_NAMES`); coarse ``[700]`` int32 in 0..4 (:data:`PBMC_COARSE_NAMES`,
        ``coarse = PBMC_FINE_TO_COARSE[fine]``).

    Raises:
        ValueError: unknown ``representation``.
        DataUnavailableError: the wheel is neither cached nor downloadable (the message gives the
            ``pip download`` command), or h5py is missing (``pip install h5py`` / ``jaxcore[data]``).

    References:
        G. X. Zheng et al. "Massively parallel digital transcriptional profiling of single cells."
        Nature Communications, 2017 (the 68k PBMC data; scanpy's reduced copy).

    Examples:
        >>> x, fine, coarse = load_pbmc68k()  # doctest: +SKIP
        >>> x.shape, np.bincount(coarse).tolist()  # doctest: +SKIP
        ((700, 765), [192, 369, 95, 31, 13])
    """
    if representation not in ("genes", "pca"):
        raise ValueError(f"representation: expected one of 'genes', 'pca', got {representation!r}")

    def build() -> dict[str, np.ndarray]:
        try:
            import h5py
        except ImportError as exc:
            raise DataUnavailableError("load_pbmc68k reads an .h5ad file with h5py; run: pip install h5py   "
                                       "(or: pip install 'jaxcore[data]')") from exc
        path = wheel_file("scanpy", SCANPY_VERSION, _MEMBER, wheel_sha256=SCANPY_SHA256,
                          member_sha256=_MEMBER_SHA256, allow_download=allow_download)
        with h5py.File(path, "r") as f:
            x = np.asarray(f["X"], np.float32)
            pca = np.asarray(f["obsm"]["X_pca"], np.float32)
            fine = np.asarray(f["obs"]["bulk_labels"], np.int32)
            names = tuple(s.decode() for s in f["uns"]["bulk_labels_categories"][()])
        if names != PBMC_FINE_NAMES or x.shape != (700, 765) or not np.array_equal(
                np.bincount(fine, minlength=10), _COUNTS):
            raise DataUnavailableError(f"{path}: not the expected pbmc68k_reduced contents (cell types {names}, "
                                       f"shape {x.shape})")
        return {"x": x, "pca": pca, "fine": fine}

    arrays = cached_arrays("scanpy-pbmc68k-reduced", build)
    fine = arrays["fine"]
    x = arrays["x"] if representation == "genes" else arrays["pca"]
    return x, fine, PBMC_FINE_TO_COARSE[fine]
