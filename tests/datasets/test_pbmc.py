"""The pbmc68k_reduced loader (scanpy's wheel, h5py)."""

import numpy as np
import pytest

from jaxcore.datasets import PBMC_COARSE_NAMES, PBMC_FINE_NAMES, PBMC_FINE_TO_COARSE, load_pbmc68k


def test_shapes_labels_and_grouping():
    x, fine, coarse = load_pbmc68k()
    assert x.shape == (700, 765) and x.dtype == np.float32 and np.isfinite(x).all()
    assert np.bincount(fine).tolist() == [68, 8, 19, 54, 43, 129, 95, 13, 31, 240]
    assert np.array_equal(coarse, PBMC_FINE_TO_COARSE[fine])
    assert np.bincount(coarse).tolist() == [192, 369, 95, 31, 13]
    assert len(PBMC_FINE_NAMES) == 10 and len(PBMC_COARSE_NAMES) == 5
    # the T-cell lineage holds exactly the CD4+/CD8+ types
    t_cells = [n for n, c in zip(PBMC_FINE_NAMES, PBMC_FINE_TO_COARSE) if c == 0]
    assert all(n.startswith(("CD4+", "CD8+")) for n in t_cells) and len(t_cells) == 5
    xp, fine2, _ = load_pbmc68k(representation="pca")
    assert xp.shape == (700, 50) and np.array_equal(fine, fine2)


def test_bad_representation():
    with pytest.raises(ValueError, match="representation: expected"):
        load_pbmc68k(representation="umap")
