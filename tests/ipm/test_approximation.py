import jax
import pytest

from jaxcore.ipm import (
    dirichlet_process_approximation_bounds,
    dirichlet_process_approximation_error,
    dirichlet_process_finite,
    dirichlet_process_stick_breaking,
    dirichlet_process_urn,
    dlip,
    pad_atoms,
    uniform_base,
)

SETTINGS = {"num_grid": 20, "num_starts": 2, "max_steps": 60}


def test_equals_the_loop_it_documents_and_respects_the_bounds_plus_floor():
    """Per repetition: split the key in three; reference, three approximations from one key, a second reference.
    With N = 40 against DP(20, U[0, 1]) every estimate lies within its analytic bound plus the noise floor (the
    suite's consistency check)."""
    base, key = uniform_base(), jax.random.key(0)
    err = dirichlet_process_approximation_error(key, base, 20.0, 12, 40, interval=(0.0, 1.0), num_reference_atoms=40,
                                                num_reps=2, **SETTINGS)
    assert err.urn.shape == err.noise_floor.shape == (2,)
    for r, k in enumerate(jax.random.split(key, 2)):
        k_ref, k_app, k_ref2 = jax.random.split(k, 3)
        ref = dirichlet_process_stick_breaking(k_ref, base, 20.0, 12, 40)

        def d(s, ref=ref):
            return float(dlip(s, ref, interval=(0.0, 1.0), **SETTINGS).value)

        for name, draw in (("urn", dirichlet_process_urn), ("finite", dirichlet_process_finite),
                           ("stick_breaking", dirichlet_process_stick_breaking)):
            assert float(getattr(err, name)[r]) == d(pad_atoms(draw(k_app, base, 20.0, 12, 40), 40))
        assert float(err.noise_floor[r]) == d(dirichlet_process_stick_breaking(k_ref2, base, 20.0, 12, 40))
    bounds = dirichlet_process_approximation_bounds(20.0, 40)
    for name in ("urn", "finite", "stick_breaking"):
        assert float(getattr(err, name).mean()) <= float(bounds[name]) + float(err.noise_floor.mean())


@pytest.mark.slow
def test_one_atom_is_far_above_the_floor():
    """N = 1 (every measure a point mass) against DP(20, U[0, 1]) (measures close to uniform): the error stands far
    above the noise floor, and N = 40 brings stick-breaking's error down."""
    base = uniform_base()
    kw = {"interval": (0.0, 1.0), "num_reference_atoms": 40, **SETTINGS}
    one = dirichlet_process_approximation_error(jax.random.key(0), base, 20.0, 12, 1, **kw)
    assert float(one.stick_breaking[0]) > 3 * float(one.noise_floor[0])
    many = dirichlet_process_approximation_error(jax.random.key(0), base, 20.0, 12, 40, **kw)
    assert float(many.stick_breaking[0]) < float(one.stick_breaking[0]) / 2


def test_bad_arguments():
    base = uniform_base()
    kw = {"interval": (0.0, 1.0), "num_reference_atoms": 10}
    with pytest.raises(TypeError, match="key: expected"):
        dirichlet_process_approximation_error(0, base, 1.0, 4, 2, **kw)
    with pytest.raises(ValueError, match="num_atoms: expected at most num_reference_atoms = 10"):
        dirichlet_process_approximation_error(jax.random.key(0), base, 1.0, 4, 11, **kw)
    with pytest.raises(ValueError, match="alpha: expected"):
        dirichlet_process_approximation_error(jax.random.key(0), base, -1.0, 4, 2, **kw)
    with pytest.raises(ValueError, match="num_reps: expected"):
        dirichlet_process_approximation_error(jax.random.key(0), base, 1.0, 4, 2, num_reps=0, **kw)
