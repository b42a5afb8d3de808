"""Does flattening the loss help under label noise? SGD vs SAM, ASAM and SAM-OBF on a digits MLP.

An MLP (64-128-128-10) is trained on scikit-learn's 1797 handwritten digits (70/30 split) with
20% of the training labels replaced by a wrong class, by SGD with momentum and by three
sharpness-aware variants that take the gradient at an adversarially perturbed point: SAM (Foret et
al., ICLR 2021), ASAM (scale-adaptive, Kwon et al., ICML 2021) and SAM-OBF, whose ascent step
perturbs the model's output biases instead of raising the loss (Vani et al., ICML 2024). Each
method is one compiled ``lax.scan`` over the steps (``jaxcore.sam.train``). The script prints the
clean test accuracy and the final sharpness (largest Hessian eigenvalue of the training loss) of
each, and plots the training loss and accuracy against sharpness.

Run::

    python examples/sam.py              # 2 seeds x 10 epochs; about 20 s on 2 CPU cores
    python examples/sam.py --small      # 1 seed, 2 epochs (CI)
"""

import argparse
import os

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import sam  # noqa: E402
from jaxcore.datasets import load_digits  # noqa: E402

METHODS = {  # (perturbation, perturbation_loss): the settings of the sam.digits benchmark
    "SGD": (None, None),
    "SAM": (sam.SAM(0.05), None),
    "ASAM": (sam.ASAM(0.5, eta=0.01), None),
    "SAM-OBF": (sam.SAM(0.05), sam.OBF(gamma=1e-12)),
}


def init_mlp(key, sizes=(64, 128, 128, 10)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / a), jnp.zeros(b)) for k, a, b in zip(keys, sizes, sizes[1:])]


def logits_fn(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, model_state, batch):          # the one loss convention of jaxcore.sam
    logits = logits_fn(params, batch["x"])
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean()
    return loss, {"logits": logits}                 # OBF needs the logits


def main(small: bool, out: str, seed: int) -> None:
    num_seeds, epochs, batch_size, noise = (1, 2, 64, 0.2) if small else (2, 10, 64, 0.2)
    images, labels = load_digits()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(labels))
    train, test = perm[: int(0.7 * len(labels))], perm[int(0.7 * len(labels)):]
    x = images.reshape(len(labels), -1)
    noisy = labels[train].copy()
    flip = rng.random(len(train)) < noise            # symmetric label noise on the training set only
    noisy[flip] = (noisy[flip] + rng.integers(1, 10, flip.sum())) % 10
    data = {"x": jnp.asarray(x[train]), "label": jnp.asarray(noisy, jnp.int32)}
    steps_per_epoch = len(train) // batch_size
    num_steps = epochs * steps_per_epoch
    optimizer = optax.sgd(optax.cosine_decay_schedule(0.05, num_steps), momentum=0.9)
    print(f"digits: {len(train)} training images ({flip.mean():.0%} labels flipped), {len(test)} test images, "
          f"{epochs} epochs of {steps_per_epoch} steps, {num_seeds} seed(s)")

    results = {}
    for name, (perturbation, perturbation_loss) in METHODS.items():
        accs, eigs, losses = [], [], []
        for s in range(num_seeds):                   # same shapes: the compiled program is reused
            key_init, key_eig = jax.random.split(jax.random.fold_in(jax.random.key(seed), s))
            indices = jnp.asarray(np.concatenate([rng.permutation(len(train))[: steps_per_epoch * batch_size]
                                                  for _ in range(epochs)]).reshape(num_steps, batch_size))
            res = sam.train(loss_fn, init_mlp(key_init), data, indices, optimizer=optimizer,
                            perturbation=perturbation, perturbation_loss=perturbation_loss)
            pred = jnp.argmax(logits_fn(res.params, jnp.asarray(x[test])), -1)
            accs.append(float(jnp.mean(pred == jnp.asarray(labels[test]))))
            sharp_batch = {"x": data["x"][:256], "label": data["label"][:256]}
            eigs.append(float(sam.hessian_max_eigenvalue(key_eig, loss_fn, res.params, sharp_batch,
                                                         num_iters=20).eigenvalue))
            losses.append(np.asarray(res.losses))
        results[name] = (np.array(accs), np.array(eigs), np.mean(losses, 0))
        print(f"  {name:8s} test accuracy {100 * np.mean(accs):5.1f}% +- {100 * np.std(accs):.1f}   "
              f"lambda_max {np.mean(eigs):7.2f}")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    smooth = np.ones(steps_per_epoch) / steps_per_epoch
    for name, (accs, eigs, loss) in results.items():
        ax1.plot(np.arange(len(loss) - len(smooth) + 1) / steps_per_epoch + 1, np.convolve(loss, smooth, "valid"),
                 label=name)
        ax2.errorbar(eigs.mean(), 100 * accs.mean(), xerr=eigs.std(), yerr=100 * accs.std(), fmt="o", capsize=3,
                     label=name)
    ax1.set(xlabel="epoch", ylabel="training loss (noisy labels, 1-epoch mean)", title="Training")
    ax2.set(xlabel="largest Hessian eigenvalue (training loss)", ylabel="clean test accuracy (%)",
            title="Accuracy vs sharpness")
    ax1.legend()
    ax2.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "sam_digits.png")
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="1 seed, 2 epochs (CI)")
    parser.add_argument("--out", default="results/examples/sam", help="folder for the figure")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, the label noise and the inits")
    args = parser.parse_args()
    jaxcore.enable_compilation_cache()   # keep compiled programs on disk (see examples/README.md)
    main(args.small, args.out, args.seed)
