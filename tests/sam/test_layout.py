"""The family's layout (issue 50): modules by concept, no import circles, the abstract/final pattern, and no
module global holding the user's loss function."""

import ast
import gc
import pathlib
import weakref

import jax
import jax.numpy as jnp
import optax
import pytest

from jaxcore import sam

PACKAGE = pathlib.Path(sam.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _imports(name):
    """The sibling modules that ``jaxcore/sam/<name>.py`` imports (relative or absolute)."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                out.add(node.module.split(".")[0])
            elif node.level == 1:
                out.update(a.name for a in node.names)
            elif node.module and node.module.startswith("jaxcore.sam."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[2] for a in node.names if a.name.startswith("jaxcore.sam."))
    return out & set(MODULES)


def test_every_module_is_at_most_700_lines_and_imports_form_no_circle():
    for name in MODULES + ["__init__"]:
        lines = (PACKAGE / f"{name}.py").read_text().count("\n")
        assert lines <= 700, f"jaxcore/sam/{name}.py has {lines} lines"
    graph = {m: _imports(m) for m in MODULES}
    assert graph["_checks"] == set() and graph["_loss"] == set()  # the leaves
    done, active = set(), []

    def visit(m):  # depth-first search: a module met again on the active path is a circle
        if m in active:
            pytest.fail("import circle: " + " -> ".join(active[active.index(m):] + [m]))
        if m in done:
            return
        active.append(m)
        for n in sorted(graph[m]):
            visit(n)
        active.pop()
        done.add(m)

    for m in MODULES:
        visit(m)


def test_no_module_is_named_like_a_public_function():
    assert not set(MODULES) & set(sam.__all__)


def test_perturbation_is_abstract_and_the_geometries_final():
    assert sam.Perturbation.__abstractmethods__ == frozenset({"perturb", "direction"})
    assert "rho" in sam.Perturbation.__abstractvars__ and "needs_key" in sam.Perturbation.__abstractclassvars__
    with pytest.raises(TypeError):
        sam.Perturbation()

    class NoKeyFlag(sam.Perturbation):  # a new geometry must declare rho and needs_key
        rho: float = 0.1

        def perturb(self, grads, params, rho, *, key=None):
            return grads

        def direction(self, ascent_grads, perturbed_grads):
            return perturbed_grads

    with pytest.raises(TypeError, match="needs_key"):
        NoKeyFlag()
    for cls in (sam.SAM, sam.ASAM, sam.GSAM, sam.RandomDirection, sam.OBF):
        assert getattr(cls, "__final__", False), cls.__name__
        assert not getattr(cls, "__abstractmethods__", frozenset())
    # the same directions as before: SAM, ASAM and the random control update with g_p; GSAM decomposes
    h, gp = jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0])
    for p in (sam.SAM(0.1), sam.ASAM(0.1), sam.RandomDirection(0.1)):
        assert p.direction(h, gp) is gp
    assert sam.GSAM(0.1, alpha=0.5).direction(h, gp).tolist() == [2.0, -0.5]


def _module_globals_hold(obj):
    """Whether a global of a jaxcore.sam module (or a container in one, two levels deep) refers to ``obj``."""
    import sys

    def holds(x, depth):
        if x is obj:
            return True
        if depth == 0:
            return False
        if isinstance(x, dict):
            return any(holds(k, depth - 1) or holds(v, depth - 1) for k, v in x.items())
        if isinstance(x, (list, tuple, set, frozenset)):
            return any(holds(v, depth - 1) for v in x)
        return False

    mods = [m for n, m in sys.modules.items() if n == "jaxcore.sam" or n.startswith("jaxcore.sam.")]
    return any(holds(v, 3) for m in mods for k, v in vars(m).items() if not k.startswith("__"))


def _obf_loss_fn():
    def loss(w, _, b):
        logits = b["x"] @ w
        return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"]).mean(), {"logits": logits}

    return loss


def test_obf_step_checks_labels_on_the_host_and_keeps_no_reference_to_the_loss_function():
    """The label check of ``step`` (OBF, concrete labels) caches nothing: no module global of the family
    refers to the loss function (it did: a dict keyed on it, issue 50), and the check alone lets it be
    collected once JAX's trace cache is cleared (the compiled step itself is held by JAX's and equinox's
    caches, as every jitted function with a static argument is)."""
    from jaxcore.sam.obf import _host_checked_labels

    w = jnp.zeros((3, 3))
    batch = {"x": jnp.eye(4, 3), "label": jnp.array([0, 1, 2, 0], jnp.int32)}
    opt, obf = optax.sgd(0.1), sam.OBF()
    loss = _obf_loss_fn()
    res = sam.step(loss, w, sam.init(w, opt), batch, optimizer=opt, perturbation=sam.SAM(0.05),
                   perturbation_loss=obf)
    jax.block_until_ready(res.params)
    bad = {"x": batch["x"], "label": jnp.array([0, 1, 3, 0], jnp.int32)}
    with pytest.raises(ValueError, match=r"batch\[label\]: expected OBF class indices in \[0, 3\)"):
        sam.step(loss, w, sam.init(w, opt), bad, optimizer=opt, perturbation=sam.SAM(0.05), perturbation_loss=obf)
    assert not _module_globals_hold(loss)

    other = _obf_loss_fn()
    assert _host_checked_labels(other, w, None, batch, obf, True)  # checked on the host (valid labels)
    assert not _host_checked_labels(other, w, None, batch, obf, False)  # check_labels=False: nothing runs
    ref = weakref.ref(other)
    del other
    jax.clear_caches()
    gc.collect()
    assert ref() is None, "the label check kept the loss function alive"


def test_a_user_geometry_under_the_abstract_base_runs_in_step_like_sam():
    """A new geometry subclasses Perturbation (declaring rho and needs_key); step takes it as it takes SAM."""

    class Normalised(sam.Perturbation):
        rho: float = 0.05
        needs_key = False  # a plain class attribute satisfies the abstract class variable

        def perturb(self, grads, params, rho, *, key=None):
            return rho * grads / jnp.linalg.norm(grads)

        def direction(self, ascent_grads, perturbed_grads):
            return perturbed_grads

    def loss(w, _, b):
        return jnp.mean((b["x"] @ w - b["y"]) ** 2), {}

    w = jnp.array([0.3, -0.2, 0.1])
    batch = {"x": jnp.eye(4, 3) + 0.5, "y": jnp.array([1.0, -1.0, 0.5, 2.0])}
    opt = optax.sgd(0.1)
    ours = sam.step(loss, w, sam.init(w, opt), batch, optimizer=opt, perturbation=Normalised(0.2))
    ref = sam.step(loss, w, sam.init(w, opt), batch, optimizer=opt, perturbation=sam.SAM(0.2))
    assert jnp.allclose(ours.params, ref.params, rtol=1e-6, atol=1e-7)
    assert float(ours.info.perturbed_loss) == pytest.approx(float(ref.info.perturbed_loss), rel=1e-6)
