"""Tests of jaxcore.inverse.solvers: the solver classes give the numbers of the implementation they replaced.

The reference outputs (``data/restoration_reference.npz``) were written before the redesign by
``python tests/inverse/_restoration_cases.py``; every public restoration function and ``restore_batch`` must
reproduce them to 1e-6 (the single-image methods bit for bit).
"""

import numpy as np
import pytest

from ._restoration_cases import QUICK, REFERENCE, run_all


def _compare(outputs, names):
    ref = np.load(REFERENCE)
    worst, bitwise = 0.0, 0
    for name in names:
        a, b = outputs[name], ref[name]
        assert a.dtype == b.dtype and a.shape == b.shape, name
        err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        assert err <= 1e-6, (name, err)
        worst = max(worst, err)
        bitwise += bool(np.array_equal(a, b))
    single = [n for n in names if not n.startswith("batch/")]
    assert all(np.array_equal(outputs[n], ref[n]) for n in single), [n for n in single
                                                                     if not np.array_equal(outputs[n], ref[n])]
    print(f"{bitwise}/{len(names)} arrays bitwise equal, worst |difference| {worst:.2e}")


def test_quick_cases_equal_the_frozen_reference():
    outputs = run_all(QUICK)
    names = [n for n in np.load(REFERENCE).files if n.rsplit("/", 1)[0] in QUICK]
    assert sorted(outputs) == sorted(names) and len(names) >= len(QUICK)
    _compare(outputs, names)


@pytest.mark.slow  # 22 compiled restorations, ~17 s CPU
def test_every_case_equals_the_frozen_reference():
    outputs = run_all()
    ref = np.load(REFERENCE)
    assert sorted(outputs) == sorted(ref.files)
    _compare(outputs, ref.files)


def _tiny():
    import jax.numpy as jnp

    from jaxcore.inverse import GaussianMMSEDenoiser, Identity, constant_schedule

    return (jnp.full((4, 4, 1), 0.6), Identity(), GaussianMMSEDenoiser(0.5, 0.01),
            constant_schedule(5, sigma=0.05, alpha=1.0, step_size=1e-3), 0.05)


def test_functions_are_their_solver_classes():
    """Each public function is restore() with its solver; restore_batch takes a name or the solver object."""
    import jax

    from jaxcore.inverse import RED, SNORE, PnPHQS, PnPPGD, pnp_hqs, pnp_pgd, red, restore, restore_batch, snore

    y, op, den, sched, sy = _tiny()
    k = jax.random.key(0)
    pairs = [(snore(k, y, op, den, sched, sy, num_samples=2), restore(k, y, op, den, sched, sy,
                                                                      method=SNORE(num_samples=2))),
             (red(None, y, op, den, sched, sy, prox=True), restore(None, y, op, den, sched, sy, method=RED(prox=True))),
             (pnp_pgd(None, y, op, den, sched, sy), restore(None, y, op, den, sched, sy, method=PnPPGD())),
             (pnp_hqs(None, y, op, den, sched, sy), restore(None, y, op, den, sched, sy, method=PnPHQS()))]
    for a, b in pairs:
        np.testing.assert_array_equal(a.x, b.x)
    keys = jax.random.split(k, 2)
    by_name = restore_batch(keys, y[None], op, den, sched, sy, method="snore", num_samples=2, track=True)
    by_object = restore_batch(keys, y[None], op, den, sched, sy, method=SNORE(num_samples=2), track=True)
    for a, b in zip(by_name, by_object):
        np.testing.assert_array_equal(a, b)
    # a solver is a static pytree: equal options, equal solver (one compiled program)
    assert SNORE(num_samples=2) == SNORE(num_samples=2) and SNORE() != SNORE(prox=True)
    with pytest.raises(TypeError, match="method: expected an AbstractRestorer"):
        restore(k, y, op, den, sched, sy, method="snore")
    with pytest.raises(TypeError, match="options: expected the loop's keyword options"):
        restore_batch(keys, y[None], op, den, sched, sy, method=SNORE(), num_samples=2)
    with pytest.raises(TypeError, match=r"options: expected keyword options of red"):
        restore_batch(keys, y[None], op, den, sched, sy, method="red", num_samples=2)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        restore(None, y, op, den, sched, sy, method=SNORE())
    with pytest.raises(ValueError, match="num_samples: expected an int >= 1, got 0"):
        SNORE(num_samples=0)
    with pytest.raises(TypeError, match="prox: expected a bool"):
        RED(prox=1)


def test_abstract_restorer_is_the_extension_point():
    """A user's solver subclasses AbstractRestorer; the base itself and a half-written solver cannot be built."""
    from typing import ClassVar

    import jax.numpy as jnp

    from jaxcore.inverse import RED, SNORE, AbstractRestorer, PnPHQS, PnPPGD, restore

    y, op, den, sched, sy = _tiny()

    class Halfway(AbstractRestorer):  # the step of RED without the prior, with a state counting the steps
        random: ClassVar[bool] = False
        sigma_positive: ClassVar[bool] = False

        def init(self, problem, x0):
            return jnp.zeros((), jnp.int32)

        def step(self, problem, x, state, sigma, alpha, step_size, key):
            return x - step_size * problem.operator.data_grad(x, problem.y, problem.sigma_y), state + 1

    out = restore(None, y, op, den, sched, sy, method=Halfway())
    np.testing.assert_allclose(out.x, y, atol=1e-7)  # y is the data term's minimiser under Identity
    with pytest.raises(TypeError):
        AbstractRestorer()

    class NoStep(AbstractRestorer):
        random: ClassVar[bool] = False
        sigma_positive: ClassVar[bool] = False

        def init(self, problem, x0):
            return None

    with pytest.raises(TypeError):
        NoStep()
    for cls in (SNORE, RED, PnPPGD, PnPHQS):  # the concrete solvers are final: leaves of the hierarchy
        assert cls.__bases__ == (AbstractRestorer,) and not cls.__subclasses__()


@pytest.mark.parametrize("name", ["red", "red_prox", "pnp_pgd", "pnp_hqs"])
def test_a_key_to_a_deterministic_method_is_deprecated(name):
    import warnings

    import jax

    from jaxcore.inverse import METHODS

    y, op, den, sched, sy = _tiny()
    fn = METHODS[name]
    with pytest.warns(DeprecationWarning, match=rf"^{name}: the key is unused .* TypeError from jaxcore 0\.2\.0"):
        keyed = fn(jax.random.key(0), y, op, den, sched, sy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # None is the supported form: no warning
        np.testing.assert_array_equal(fn(None, y, op, den, sched, sy).x, keyed.x)
    with pytest.raises(TypeError, match="key: expected a jax.random.key"):
        fn(0, y, op, den, sched, sy)
