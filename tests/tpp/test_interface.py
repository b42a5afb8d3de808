"""The one interface of the family (issue 50): every model kind is an ``AbstractTPP``; the abstract bases refuse
to build without their abstract methods; the interface's methods agree with the functional forms; ``evaluate``
scores any implementation; the package's modules import no private name of another and form no circle."""

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore import tpp

PKG = pathlib.Path(tpp.__file__).parent
BATCH = tpp.EventBatch.from_sequences([[0.5, 1.0, 2.5], [0.2, 3.0]], T=4.0)


def _models():
    k = jax.random.key(0)
    return {
        "Poisson": tpp.Poisson(1.0), "Hawkes": tpp.Hawkes(0.2, 0.8, 1.0),
        "SharedDecayHawkes": tpp.SharedDecayHawkes(0.2, 0.8, 1.0), "SelfCorrecting": tpp.SelfCorrecting(0.5, 0.2),
        "NJDTPP": tpp.NJDTPP(1, key=k, width=4, depth=1), "HawkesSDE": tpp.Hawkes(0.2, 0.8, 1.0).jump_diffusion(),
        "RMTPP": tpp.RMTPP(1, key=k, hidden=4), "NHP": tpp.NHP(1, key=k, hidden=4),
        "THP": tpp.THP(1, key=k, d_model=4, num_heads=1, num_layers=1), "SAHP": tpp.SAHP(1, key=k, d_model=4,
                                                                                       num_heads=1, num_layers=1),
        "IFTPP": tpp.IFTPP(1, key=k, hidden=4, embed=2, num_components=2),
        "AttNHP": tpp.AttNHP(1, key=k, d_model=4, num_heads=1, num_layers=1),
    }


def test_every_model_kind_implements_the_interface():
    # (each kind's likelihood, intensity and sampling have their own oracle tests; here: one of each kind runs)
    models = _models()
    for name, m in models.items():
        assert isinstance(m, tpp.AbstractTPP), name
        assert m.num_marks == 1, name
    for name in ("Hawkes", "NJDTPP", "RMTPP"):
        lam = models[name].intensity(BATCH, jnp.array([[0.3, 1.2], [0.1, 3.5]]))
        assert lam.shape == (2, 2, 1) and bool(jnp.all(lam > 0)), name
        assert models[name].log_likelihood(BATCH).shape == (2,), name
    for name in ("Poisson", "Hawkes", "SharedDecayHawkes", "SelfCorrecting"):
        assert isinstance(_models()[name], tpp.ClassicalTPP), name


def test_abstract_bases_refuse_an_incomplete_subclass():
    with pytest.raises(TypeError):
        tpp.AbstractTPP()

    class NoJump(tpp.JumpDiffusion):
        def initial_state(self):
            return jnp.zeros(1)

        def drift(self, t, eta):
            return jnp.zeros_like(eta)

    with pytest.raises(TypeError, match="jump"):
        NoJump()

    class NoStates(tpp.NeuralTPP):
        num_marks = 1

        def log_intensity(self, state, dt):
            return jnp.zeros(1)

    with pytest.raises(TypeError, match="states"):
        NoStates()


def test_classical_methods_are_their_jump_diffusions_by_the_exact_flow():
    h = tpp.Hawkes(0.2, 0.8, 1.0)
    got = h.predict_next(None, BATCH, horizon=6.0)
    want = tpp.predict_next(h.jump_diffusion(), BATCH, horizon=6.0, method="exact")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    k = jax.random.key(3)
    got = h.sample_next(k, BATCH, horizon=6.0, num_samples=4)
    want = tpp.sample_next(k, h.jump_diffusion(), BATCH, horizon=6.0, num_samples=4, method="exact")
    np.testing.assert_array_equal(np.asarray(got.time), np.asarray(want.time))
    gen = h.generate(k, BATCH, num_events=3, horizon=20.0)
    np.testing.assert_array_equal(np.asarray(gen.time), np.asarray(
        tpp.generate(k, h.jump_diffusion(), BATCH, num_events=3, horizon=20.0, method="exact").time))
    # the exact flow's likelihood is the closed form's
    np.testing.assert_allclose(np.asarray(h.jump_diffusion().log_likelihood(BATCH, method="exact")),
                               np.asarray(h.log_likelihood(BATCH)), rtol=1e-5)


def test_jump_diffusion_methods_are_the_solver():
    m = tpp.NJDTPP(1, key=jax.random.key(0), width=4, depth=1)
    np.testing.assert_array_equal(np.asarray(m.log_likelihood(BATCH, num_substeps=3)),
                                  np.asarray(tpp.solve(m, BATCH, num_substeps=3).log_likelihood))
    t = jnp.array([[0.3, 1.2], [0.1, 3.5]])
    np.testing.assert_array_equal(np.asarray(m.intensity(BATCH, t)), np.asarray(tpp.intensity(m, BATCH, t)))
    with pytest.raises(TypeError, match="key"):
        m.predict_next(0, BATCH, horizon=1.0)


class _Fixed(tpp.AbstractTPP):
    """A model that reports given evaluation terms: ``evaluate`` must score any implementation."""

    ll: jax.Array
    time: jax.Array
    gaps: jax.Array

    @property
    def num_marks(self):
        return 1

    def log_likelihood(self, batch):
        return self.ll

    def intensity(self, batch, t):
        return jnp.ones(t.shape + (1,))

    def sample_next(self, key, batch, *, horizon, num_samples=16):
        raise AssertionError("not used by evaluate")

    def predict_next(self, key, batch, *, horizon):
        valid = batch.mask & jnp.concatenate([batch.mask[:, 1:], jnp.zeros((batch.num_sequences, 1), bool)], 1)
        B, L = batch.times.shape
        return tpp.NextEventPrediction(self.time, jnp.zeros((B, L), jnp.int32), jnp.ones((B, L, 1)), valid)

    def generate(self, key, batch, *, num_events, horizon):
        raise AssertionError("not used by evaluate")

    def evaluation_terms(self, key, batch, *, horizon, num_substeps=10, num_samples=1, num_grid=256,
                         chunk_size=None):
        return tpp.EvaluationTerms(self.ll, self.predict_next(key, batch, horizon=horizon), self.gaps)


def test_evaluate_scores_any_implementation_of_the_interface():
    rng = np.random.default_rng(0)
    time = jnp.asarray(rng.uniform(0, 4, (2, 3)), jnp.float32)
    gaps = jnp.where(BATCH.mask, jnp.asarray(rng.exponential(1.0, (2, 3)), jnp.float32), 0.0)
    model = _Fixed(jnp.array([-3.0, -1.0]), time, gaps)
    r = tpp.evaluate(model, BATCH, horizon=1.0)
    assert float(r.nll) == pytest.approx(4.0 / 5.0)
    t, m = np.asarray(BATCH.times), np.asarray(BATCH.mask)
    err = [(float(time[b, i]) - t[b, i + 1]) ** 2 for b in range(2) for i in range(2) if m[b, i + 1]]
    assert float(r.rmse) == pytest.approx(np.sqrt(np.mean(err)), rel=1e-5)
    assert float(r.accuracy) == 1.0
    assert float(r.ks) == pytest.approx(float(tpp.ks_statistic(gaps, BATCH.mask)), rel=1e-6)


def _imports(path):
    """``[(module, names)]`` of the module-level relative imports of one file of the package."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.append((node.module, [a.name for a in node.names]))
    return out


def test_modules_import_no_private_name_and_form_no_circle():
    graph = {}
    for path in sorted(PKG.glob("*.py")):
        mod = path.stem
        graph[mod] = set()
        for target, names in _imports(path):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path.name} imports private {private} from .{target}"
            graph[mod].add(target)
    # also the imports inside functions: none reaches back into a private name
    for path in PKG.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert not [a.name for a in node.names if a.name.startswith("_")], path.name
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for n in graph.get(m, ()):
            assert state.get(n) != "open", f"import circle: {' -> '.join(stack + [m, n])}"
            if n not in state:
                visit(n, stack + [m])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [])


def test_every_module_is_at_most_700_lines():
    for path in PKG.glob("*.py"):
        n = len(path.read_text().splitlines())
        assert n <= 700, f"{path.name}: {n} lines"
