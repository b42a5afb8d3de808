"""``compare_models`` (the paper's comparison, moved from the benchmark suite into the library, issue 50): its
rows are exactly the scores of the models fitted and evaluated one by one; its refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import tpp


@pytest.fixture(scope="module")
def splits():
    data = tpp.synthetic_hawkes(jax.random.key(0), num_sequences=12, T=20.0, max_events=64).trim(32)
    return data[:6], data[6:8], data[8:]


@pytest.mark.slow  # trains NJDTPP and fits three classical models: 103 s wall at load 13 on 2 cores
def test_compare_models_rows_are_the_models_scored_one_by_one(splits):
    train, valid, test = splits
    truth = tpp.Hawkes(0.2, 0.8, 1.0)
    key = jax.random.key(1)
    res = tpp.compare_models(key, train, valid, test, truth=truth, mle_steps=5, njdtpp_steps=2, width=4,
                             num_substeps=2, eval_substeps=2, batch_size=4, horizon_gaps=4.0)
    assert list(res.scores) == ["Poisson", "Hawkes", "Self-correcting", "NJDTPP", "true model"]
    rate = float(np.asarray(train.num_events).sum()) / float(np.asarray(train.T).sum())
    assert res.horizon == pytest.approx(4.0 / rate)
    # the Poisson row: the closed-form MLE (N / sum T) scored by evaluate
    poisson = tpp.Poisson(rate).fit_closed_form(train)
    np.testing.assert_allclose(np.asarray(res.models["Poisson"].mu), np.asarray(poisson.mu), rtol=1e-6)
    want = tpp.evaluate(poisson, test, horizon=res.horizon, num_substeps=2)
    for a, b in zip(res.scores["Poisson"], want, strict=True):
        assert float(a) == pytest.approx(float(b), rel=1e-6)
    # the Hawkes row: fit_mle from mu = alpha = r / 2, beta = r
    h0 = tpp.SharedDecayHawkes(jnp.full((1,), 0.5 * rate), jnp.full((1, 1), 0.5 * rate), rate)
    fitted = tpp.fit_mle(h0, train, num_steps=5).model
    np.testing.assert_allclose(np.asarray(res.models["Hawkes"].alpha), np.asarray(fitted.alpha), rtol=1e-5)
    # the true model as given, scored by its exact flow
    assert res.models["true model"] is truth
    assert float(res.scores["true model"].nll) == pytest.approx(
        float(tpp.evaluate(truth, test, horizon=res.horizon).nll), rel=1e-6)
    # NJDTPP: trained by train with the documented keys, scored on eval_substeps with the evaluation key
    assert isinstance(res.models["NJDTPP"], tpp.NJDTPP)
    k_eval = jax.random.split(key, 3)[2]
    want = tpp.evaluate(res.models["NJDTPP"], test, k_eval, horizon=res.horizon, num_substeps=2)
    assert float(res.scores["NJDTPP"].nll) == pytest.approx(float(want.nll), rel=1e-6)
    assert all(np.isfinite(float(x)) for r in res.scores.values() for x in r)


def test_compare_models_refusals(splits):
    train, valid, test = splits
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="key: expected"):
        tpp.compare_models(0, train, valid, test)
    with pytest.raises(ValueError, match="neural: expected"):
        tpp.compare_models(key, train, valid, test, neural=["LSTM"])
    with pytest.raises(TypeError, match="truth: expected"):
        tpp.compare_models(key, train, valid, test, truth=tpp.NJDTPP(1, key=key, width=2))
    with pytest.raises(TypeError, match="test_batch: expected"):
        tpp.compare_models(key, train, valid, None)
    with pytest.raises(ValueError, match="horizon_gaps: expected"):
        tpp.compare_models(key, train, valid, test, horizon_gaps=0.0)
    two = tpp.EventBatch.from_sequences([[0.5, 1.0]], [[0, 1]], T=2.0, num_marks=2)
    with pytest.raises(ValueError, match="self_correcting: expected"):
        tpp.compare_models(key, two, two, two)
    with pytest.raises(ValueError, match="batch"):
        tpp.compare_models(key, train, valid, two, self_correcting=False)
