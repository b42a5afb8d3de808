"""The fine-to-coarse assignment M: its cost accumulation and its exact solvers.

FALCON (Gadetsky et al., ICML 2024, Sec. 3) re-solves, every few steps, the discrete program

    minimise_M   - sum_{f,c} cost[f, c] M[f, c] + beta (sum_c n_c^2 / C - (F / C)^2)
    subject to   M[f, c] in {0, 1},  sum_c M[f, c] = 1 (each fine class in one coarse class),
                 n_c = sum_f M[f, c] >= 1 (each coarse class non-empty),

with ``cost[f, c]`` the mean teacher probability of fine class ``f`` over the samples of coarse class
``c``. The reference code hands it to Gurobi as a mixed-integer quadratic program. It is an exact
convex min-cost flow: since ``n_c^2 = sum_{k=1}^{n_c} (2k - 1)``, the quadratic term is a sum of unit
arcs of increasing cost. The network is source -> fine ``f`` (capacity 1, supply F at the source),
fine ``f`` -> coarse ``c`` (capacity 1, cost ``-cost[f, c]``), coarse ``c`` -> sink as unit arcs
``k = 2 .. F - C + 1`` of cost ``beta (2k - 1) / C``; the first unit (``k = 1``) is forced by a demand of
1 at every coarse node (so ``n_c >= 1``) and adds the constant ``beta / C`` per coarse class. Arc costs
increase in ``k``, so a min-cost flow fills them in order, and min-cost flows with integral capacities
have integral optima: the flow is the exact optimum of the program.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxcore._util import check_choice, check_int, check_ndim, check_scalar, expected

__all__ = ["AssignmentResult", "assignment_cost", "assignment_objective", "solve_assignment"]

#: Largest integer arc cost after scaling (OR-Tools' cost-scaling algorithm multiplies costs by the
#: number of nodes internally; 2**62 / (4 (nodes + 1)^2) keeps that inside int64).
_MAX_INT_COST = 10**9


class AssignmentResult(NamedTuple):
    """The solved fine-to-coarse assignment.

    Attributes:
        assignment: ``[F, C]`` float 0/1 matrix M (one 1 per row, every column non-empty).
        fine_to_coarse: ``[F]`` int32, the coarse class of each fine class (``argmax`` of the rows).
        objective: the program's objective at M, in float64 from the unscaled costs.
        scale: the integer scale of the flow's arc costs (arc cost = round(scale * value)); 0 for
            ``method="milp"``.
    """

    assignment: Float[Array, "F C"]
    fine_to_coarse: Int[Array, " F"]
    objective: float
    scale: float


def assignment_cost(
    teacher_probs: Float[Array, "N F"], coarse_labels: Int[Array, " N"], num_coarse: int
) -> Float[Array, "F C"]:
    """The cost of M: ``cost[f, c] = (1 / N) sum_n p_n[f] [y_n = c]``, the mean teacher mass on each pair.

    Args:
        teacher_probs: ``[N, F]`` fine-class probabilities (rows sum to 1), e.g. the EMA teacher's.
        coarse_labels: ``[N]`` int coarse labels in ``[0, C)``.
        num_coarse: C.

    Returns:
        ``[F, C]`` cost; its entries sum to 1.

    Raises:
        ValueError: mismatched shapes, ``num_coarse < 1``.

    References:
        Gadetsky, Jiang, Salzmann, Brbic. "Discovering fine-grained classes from coarsely labeled
        data." ICML 2024 (the reference code's ``cost = fine_preds.T @ one_hot(coarse) / N``).

    Examples:
        >>> import jax.numpy as jnp
        >>> assignment_cost(jnp.array([[1.0, 0.0], [0.5, 0.5]]), jnp.array([0, 1]), 2).tolist()
        [[0.5, 0.25], [0.0, 0.25]]
    """
    num_coarse = check_int(num_coarse, "num_coarse", minimum=1)
    check_ndim(teacher_probs, "teacher_probs", 2, "a [N, F] array")
    check_ndim(coarse_labels, "coarse_labels", 1, "a [N] int array")
    if np.shape(coarse_labels)[0] != np.shape(teacher_probs)[0]:
        raise ValueError(expected("coarse_labels", f"length {np.shape(teacher_probs)[0]} (the rows of teacher_probs)",
                                  f"length {np.shape(coarse_labels)[0]}", raw=True))
    return _cost(jnp.asarray(teacher_probs), jnp.asarray(coarse_labels), num_coarse)


@jax.jit
def _cost_impl(probs, onehot):
    return probs.T @ onehot / probs.shape[0]


def _cost(probs, labels, num_coarse):
    return _cost_impl(probs, jax.nn.one_hot(labels, num_coarse, dtype=probs.dtype))


def assignment_objective(cost, assignment, beta: float) -> float:
    """The program's objective ``-sum cost * M + beta (sum_c n_c^2 / C - (F / C)^2)`` in float64.

    Args:
        cost: ``[F, C]``. assignment: ``[F, C]`` 0/1 M. beta: the balance weight.

    Returns:
        The objective (a Python float).

    Examples:
        >>> import numpy as np
        >>> assignment_objective(np.array([[0.5, 0.0], [0.0, 0.5]]), np.eye(2), 1.0)
        -1.0
    """
    cost = np.asarray(cost, np.float64)
    m = np.asarray(assignment, np.float64)
    f, c = cost.shape
    n = m.sum(0)
    return float(-(cost * m).sum() + beta * ((n**2).sum() / c - (f / c) ** 2))


def _check_cost(cost, beta):
    check_ndim(cost, "cost", 2, "a [F, C] array")
    a = np.asarray(cost, np.float64)
    if a.dtype.kind not in "fiu":
        raise TypeError(expected("cost", "a real [F, C] array", f"dtype {a.dtype}", raw=True))
    f, c = a.shape
    if c < 1 or f < c:
        raise ValueError(expected("cost", "a [F, C] array with F >= C >= 1 (every coarse class needs a fine class)",
                                  f"shape {a.shape}", raw=True))
    if not np.isfinite(a).all():
        raise ValueError(expected("cost", "finite values", a, raw=False))
    beta = check_scalar(beta, "beta", nonnegative=True)
    return a, beta


def solve_assignment(
    cost: Float[Array, "F C"], beta: float = 0.0, *, method: str = "flow"
) -> AssignmentResult:
    """The exact optimum of FALCON's assignment program (module docstring), by min-cost flow or MILP.

    ``method="flow"`` (default) solves the min-cost flow with OR-Tools' ``SimpleMinCostFlow``. Its
    costs are integers: every arc cost ``v`` (``-cost[f, c]`` or ``beta (2k - 1) / C``) becomes
    ``round(s v)`` with ``s = 10^9 / max |v|``, so the returned M is optimal for costs within
    ``0.5 / s`` of the true ones; its objective is within ``2F * 0.5 / s = F max|v| 1e-9`` of the
    optimum (ties broken arbitrarily). ``method="milp"`` solves the same program as a mixed-integer
    linear program with SciPy's HiGHS (binary ``M[f, c]`` and unit variables ``u[c, k]``,
    ``n_c = sum_k u[c, k]``, ``u[c, 1] = 1``), slower, as a reference. It runs on the host (not jitted).

    Args:
        cost: ``[F, C]`` real, ``F >= C`` (:func:`assignment_cost`).
        beta: >= 0, weight of the balance term.
        method: ``"flow"`` or ``"milp"``.

    Returns:
        :class:`AssignmentResult` (arrays as JAX arrays in the default float dtype / int32).

    Raises:
        ImportError: ``method="flow"`` and OR-Tools is missing (install ``pip install "jaxcore[trees]"``).
        ValueError: ``F < C``, non-finite cost, ``beta < 0``, unknown method.
        RuntimeError: the solver reports no optimum (not expected: the program is always feasible).

    References:
        Gadetsky, Jiang, Salzmann, Brbic. "Discovering fine-grained classes from coarsely labeled
        data." ICML 2024, Eq. (5) (solved there with Gurobi).

    Examples:
        >>> import numpy as np
        >>> r = solve_assignment(np.array([[0.4, 0.0], [0.3, 0.2], [0.2, 0.0]]), beta=0.0)
        >>> r.fine_to_coarse.tolist()   # fine 1 goes to coarse 1 so that coarse 1 is non-empty
        [0, 1, 0]
    """
    a, beta = _check_cost(cost, beta)
    method = check_choice(method, "method", ("flow", "milp"))
    if method == "flow":
        m, scale = _solve_flow(a, beta)
    else:
        m, scale = _solve_milp(a, beta), 0.0
    return AssignmentResult(
        jnp.asarray(m, dtype=jnp.result_type(float)), jnp.asarray(m.argmax(1), jnp.int32),
        assignment_objective(a, m, beta), scale,
    )


def _ortools():
    try:
        from ortools.graph.python import min_cost_flow
    except ImportError as exc:  # pragma: no cover - exercised by monkeypatching in the tests
        raise ImportError(
            "jaxcore.finegrained.solve_assignment(method='flow') needs OR-Tools' min-cost flow; "
            'install it with: pip install "jaxcore[trees]"   (or pass method="milp" to use SciPy\'s HiGHS)'
        ) from exc
    return min_cost_flow


def _solve_flow(a: np.ndarray, beta: float) -> tuple[np.ndarray, float]:
    min_cost_flow = _ortools()
    f, c = a.shape
    extra = f - c  # units beyond the forced first one, at most this many per coarse class
    unit = beta * (2 * np.arange(2, extra + 2) - 1) / c  # [extra]
    biggest = max(float(np.abs(a).max()), float(unit.max()) if extra else 0.0)
    scale = _MAX_INT_COST / biggest if biggest > 0 else 1.0
    source, fine0, coarse0, sink = 0, 1, 1 + f, 1 + f + c
    tails, heads, caps, costs = [], [], [], []
    tails += [source] * f
    heads += list(range(fine0, fine0 + f))
    caps += [1] * f
    costs += [0] * f
    ff, cc = np.meshgrid(np.arange(f), np.arange(c), indexing="ij")
    tails += list(fine0 + ff.ravel())
    heads += list(coarse0 + cc.ravel())
    caps += [1] * (f * c)
    costs += list(np.rint(-a.ravel() * scale).astype(np.int64))
    icost = np.rint(unit * scale).astype(np.int64)
    for j in range(c):
        tails += [coarse0 + j] * extra
        heads += [sink] * extra
        caps += [1] * extra
        costs += list(icost)
    smcf = min_cost_flow.SimpleMinCostFlow()
    smcf.add_arcs_with_capacity_and_unit_cost(
        np.asarray(tails, np.int32), np.asarray(heads, np.int32), np.asarray(caps, np.int64),
        np.asarray(costs, np.int64))
    supplies = np.zeros(sink + 1, np.int64)
    supplies[source] = f
    supplies[coarse0:coarse0 + c] = -1  # the forced first unit of every coarse class
    supplies[sink] = -extra
    smcf.set_nodes_supplies(np.arange(sink + 1, dtype=np.int32), supplies)
    status = smcf.solve()
    if status != smcf.OPTIMAL:
        raise RuntimeError(f"solve_assignment: OR-Tools min-cost flow returned status {status} (expected OPTIMAL)")
    flows = np.asarray(smcf.flows(np.arange(f, f + f * c, dtype=np.int32)))
    m = flows.reshape(f, c).astype(np.float64)
    return m, scale


def _solve_milp(a: np.ndarray, beta: float) -> np.ndarray:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix, vstack

    f, c = a.shape
    kmax = f - c + 1
    nx, nu = f * c, c * kmax
    obj = np.concatenate([-a.ravel(), np.tile(beta * (2 * np.arange(1, kmax + 1) - 1) / c, c)])
    # each fine class in one coarse class: sum_c x[f, c] = 1
    rows = np.repeat(np.arange(f), c)
    a1 = coo_matrix((np.ones(nx), (rows, np.arange(nx))), shape=(f, nx + nu))
    # n_c: sum_f x[f, c] - sum_k u[c, k] = 0
    r_x = np.tile(np.arange(c), f)
    r_u = np.repeat(np.arange(c), kmax)
    a2 = coo_matrix((np.r_[np.ones(nx), -np.ones(nu)], (np.r_[r_x, r_u], np.r_[np.arange(nx), nx + np.arange(nu)])),
                    shape=(c, nx + nu))
    cons = [LinearConstraint(vstack([a1]), 1, 1), LinearConstraint(vstack([a2]), 0, 0)]
    lower = np.zeros(nx + nu)
    lower[nx + np.arange(c) * kmax] = 1.0  # u[c, 1] = 1: every coarse class non-empty
    res = milp(obj, constraints=cons, integrality=np.ones(nx + nu), bounds=Bounds(lower, np.ones(nx + nu)))
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"solve_assignment: HiGHS MILP returned status {res.status}: {res.message}")
    return np.rint(res.x[:nx]).reshape(f, c)
