"""Spectral clustering of a whole graph: the validated sparse eigensolver, then k-means restarts.

The embedding is the k eigenvectors of ``L_sym`` with the smallest eigenvalues
(:func:`~jaxcore.graphs.smallest_eigenpairs`, residual-checked); k-means with ``num_init`` vmapped
restarts clusters its rows. This is the full-graph baseline of the dynamic algorithm and the
first query of :func:`~jaxcore.graphs.init_clustering` (on the sparsifier).

References:
    A. Ng, M. Jordan, Y. Weiss. "On spectral clustering: analysis and an algorithm." NeurIPS 2001.
    U. von Luxburg. "A tutorial on spectral clustering." Statistics and Computing 17, 2007.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util import check_int, check_key

from .eigensolver import _chfsi, _solver_args
from .graph import DynamicGraph
from .clustering import _kmeans

__all__ = ["SpectralResult", "spectral_clustering"]


class SpectralResult(NamedTuple):
    """Result of :func:`spectral_clustering`.

    Attributes:
        labels: ``[vertex_capacity]`` int32 cluster of each vertex (-1 on padding).
        eigenvalues: ``[k]`` the smallest eigenvalues of L_sym.
        residual_norms: ``[k]`` eigenpair residuals ``||L x - lambda x||``.
        converged: bool scalar, the eigensolver met its tolerance.
        inertia: the k-means inertia of the embedding.

    Examples:
        >>> SpectralResult._fields
        ('labels', 'eigenvalues', 'residual_norms', 'converged', 'inertia')
    """

    labels: Int[Array, " V"]
    eigenvalues: Float[Array, " k"]
    residual_norms: Float[Array, " k"]
    converged: Bool[Array, ""]
    inertia: Float[Array, ""]


@jax.jit
def _labels(graph: DynamicGraph, kmeans_labels: Array) -> Array:
    return jnp.where(jnp.arange(graph.vertex_capacity) < graph.num_vertices, kmeans_labels, -1)


def _spectral(key: Array, graph: DynamicGraph, edge_weight: Array, tol: Array, k: int, kmax: int, block_size: int,
              degree: int, max_iterations: int, num_init: int) -> SpectralResult:
    """The two compiled stages, shared with :func:`smallest_eigenpairs` and :func:`kmeans` (one compilation each)."""
    k1, k2 = jax.random.split(key)
    kk = jnp.asarray(k, jnp.int32)
    eig = _chfsi(k1, graph, edge_weight, tol, kk, kmax, block_size, degree, max_iterations)
    live = (jnp.arange(graph.vertex_capacity) < graph.num_vertices).astype(edge_weight.dtype)
    res = _kmeans(k2, eig.eigenvectors, live, None, jnp.asarray(1e-4, edge_weight.dtype), kk, kmax, num_init, 300)
    return SpectralResult(_labels(graph, res.labels), eig.eigenvalues[:k], eig.residual_norms[:k], eig.converged,
                          res.inertia)


def spectral_clustering(key: Any, graph: DynamicGraph, num_clusters: int, *, edge_weight: Any = None,
                        num_init: int = 10, block_size: int | None = None, degree: int | None = None,
                        tol: float | None = None, max_iterations: int = 200) -> SpectralResult:
    """Spectral clustering of the whole graph: k smallest eigenvectors of L_sym, then k-means.

    Args:
        key: a ``jax.random.key`` (eigensolver start block and k-means++ restarts).
        graph: the graph.
        num_clusters: k (int >= 1, at most the number of vertices with an edge of positive weight).
        edge_weight: ``[edge_capacity]`` weights instead of ``graph.weight`` (a sparsifier's).
        num_init: k-means restarts (vmapped).
        block_size, degree, tol, max_iterations: the eigensolver's (:func:`smallest_eigenpairs`).

    Returns:
        :class:`SpectralResult`; check ``converged``.

    Raises:
        TypeError, ValueError: as :func:`smallest_eigenpairs` and :func:`kmeans`.

    References:
        A. Ng, M. Jordan, Y. Weiss, NeurIPS 2001; U. von Luxburg, Stat. Comput. 2007.

    Examples:
        >>> import jax
        >>> from jaxcore.graphs import from_edges
        >>> g = from_edges([0, 1, 2, 3, 4, 5, 2], [1, 2, 0, 4, 5, 3, 3])
        >>> r = spectral_clustering(jax.random.key(0), g, 2, block_size=4)
        >>> r.labels[:6].tolist() in ([0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0])
        True
    """
    key = check_key(key)
    w, k, kmax, b, degree, tol, max_iterations = _solver_args(graph, num_clusters, "num_clusters", edge_weight,
                                                              block_size, degree, tol, max_iterations)
    num_init = check_int(num_init, "num_init", minimum=1)
    return _spectral(key, graph, w, tol, k, kmax, b, degree, max_iterations, num_init)
