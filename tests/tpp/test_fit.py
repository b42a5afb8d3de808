import jax
import numpy as np
import pytest

from jaxcore.tpp import EventBatch, Hawkes, fit_mle


@pytest.mark.slow  # ~30 s CPU (L-BFGS on simulated Hawkes data); run by -m slow / CI
def test_hawkes_fit_recovers_parameters(x64):
    true = Hawkes(0.2, 0.8, 1.0)
    b, overflow = true.simulate(jax.random.key(0), 400.0, 1200, 12)
    assert not bool(np.any(overflow))
    res = fit_mle(Hawkes(0.5, 0.3, 2.0), b, num_steps=60)
    m = res.model
    # 12 x 400 time units, ~4800 events: standard errors are a few percent
    assert float(m.mu[0]) == pytest.approx(0.2, rel=0.25)
    assert float(m.alpha[0, 0]) == pytest.approx(0.8, rel=0.2)
    assert float(m.beta[0, 0]) == pytest.approx(1.0, rel=0.2)
    assert float(res.losses[-1]) < float(res.losses[0])

    # the optimum beats the truth on the training data (it is the MLE)
    n = float(b.num_events.sum())
    assert -float(m.log_likelihood(b).sum()) / n <= -float(true.log_likelihood(b).sum()) / n + 1e-6


def test_fit_errors():
    b = EventBatch.from_sequences([[0.1]])
    with pytest.raises(TypeError, match="model: expected a jaxcore.tpp classical model"):
        fit_mle(object(), b)
    with pytest.raises(ValueError, match="num_steps: expected an int >= 1"):
        fit_mle(Hawkes(0.2, 0.1, 1.0), b, num_steps=0)


def test_fit_mle_program_has_no_host_callback_and_warns_on_divergence():
    """The loop's iterates are valid by construction: no run-time checks inside, so JAX's persistent
    compilation cache can store the program; a diverged fit warns and keeps its history."""
    import warnings

    import optax

    from jaxcore.tpp import EventBatch, SharedDecayHawkes, fit_mle
    from jaxcore.tpp.fit import _fit_run

    b = EventBatch.from_sequences([[0.5, 1.0, 1.2, 3.0], [0.4, 2.5]], T=4.0)
    m = SharedDecayHawkes(1.0, 0.5, 1.0)
    opt = optax.sgd(1e6)
    assert "callback" not in _fit_run.lower(m, m.to_unconstrained(), b, opt, 5, False, {}).as_text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_mle(m, b, num_steps=5, optimizer=opt)
    assert res.losses.shape == (5,) and not np.all(np.isfinite(np.asarray(res.losses)))
    assert any("fit_mle: the optimisation diverged" in str(w.message) for w in caught)
