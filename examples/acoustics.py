"""Can a neural field learn a room's impulse responses from probe recordings alone? A simulated office.

Two agents move through a 5 x 4 x 3 m room (simulated by jaxcore's differentiable image-source method,
checked against pyroomacoustics; its RIRs high-passed at 30 Hz to remove the image-source method's
positive offset): one plays a 64-sample white-noise probe, the other records it at
30 dB SNR. A neural acoustic field (a learned feature grid shared by the room, a reciprocal pair
encoding, a band-envelope decoder) is trained on the recordings only (He et al., ICML 2024, in kind),
then asked for the RIRs of unseen source-receiver pairs. Printed: T60 / C50 / EDT / STFT errors
against the true RIRs, beside nearest-neighbour and inverse-distance interpolation of the recordings;
the figure shows true vs predicted RIRs and energy decay curves.

Run::

    python examples/acoustics.py              # 200 training pairs, 800 steps: about a minute on 2 CPU cores
    python examples/acoustics.py --small      # 40 pairs, 60 steps (CI)
"""

import argparse
import os
import time

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import jaxcore  # noqa: E402
from jaxcore import acoustics as ac  # noqa: E402


def main(small: bool, out: str, seed: int) -> None:
    fs, n = 8000.0, (1024 if small else 2048)
    num_train, num_test, steps = (40, 10, 60) if small else (200, 50, 800)
    room = ac.Room([5.0, 4.0, 3.0], absorption=np.array([0.2, 0.2, 0.25, 0.25, 0.1, 0.4]), fs=fs)
    key = jax.random.key(seed)
    s, r = ac.random_pairs(key, room, num_train + num_test)
    data = ac.simulate_probing(jax.random.fold_in(key, 1), room, s, r, order=12 if small else 24, num_samples=n,
                               probe_length=64, snr_db=30.0, highpass_hz=30.0)
    tr, te = slice(0, num_train), slice(num_train, num_train + num_test)
    print(f"room {room.dims.tolist()} m, Sabine T60 {float(ac.sabine_t60(room)):.3f} s; "
          f"{num_train} training recordings, {num_test} unseen pairs")
    t0 = time.perf_counter()
    field = ac.AcousticField(room.dims, n, key=jax.random.fold_in(key, 2), fs=fs,
                             width=64 if small else 256, depth=2 if small else 3)
    res = ac.train_field(jax.random.fold_in(key, 3), field, s[tr], r[tr], data.recordings[tr], probe=data.probe,
                         num_steps=steps, learning_rate=3e-3)
    print(f"trained {steps} steps in {time.perf_counter() - t0:.1f} s; loss {float(res.history[0]):.3f} -> "
          f"{float(res.history[-20:].mean()):.3f}")
    deconv = ac.wiener_deconvolve(data.recordings[tr], data.probe, n, snr_db=30.0)
    preds = {
        "field": ac.predict_rir(res.field, s[te], r[te]),
        "nearest neighbour": ac.nearest_neighbour_rir(s[tr], r[tr], deconv, s[te], r[te]),
        "inverse distance": ac.inverse_distance_rir(s[tr], r[tr], deconv, s[te], r[te]),
    }
    print(f"{'method':18s} {'T60 %':>7s} {'C50 dB':>7s} {'EDT ms':>7s} {'STFT':>7s}")
    for name, h in preds.items():
        e = ac.rir_errors(h, data.rirs[te], fs)
        print(f"{name:18s} {float(e.t60_pct.mean()):7.2f} {float(e.c50_db.mean()):7.2f} "
              f"{float(e.edt_ms.mean()):7.1f} {float(e.stft.mean()):7.4f}")
    t = np.arange(n) / fs * 1000
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
    ax[0].plot(t, np.asarray(data.rirs[te][0]), lw=0.7, label="true")
    ax[0].plot(t, np.asarray(preds["field"][0]), lw=0.7, alpha=0.8, label="field")
    ax[0].set(xlim=(0, 80), xlabel="ms", title="an unseen pair")
    ax[0].legend()
    for j in range(3):
        ax[1].plot(t, np.asarray(ac.schroeder_decay(data.rirs[te][j])), "k", lw=1, label="true" if j == 0 else None)
        ax[1].plot(t, np.asarray(ac.schroeder_decay(preds["field"][j])), "--", lw=1, label="field" if j == 0 else None)
    ax[1].set(ylim=(-60, 2), xlabel="ms", ylabel="dB", title="energy decay curves")
    ax[1].legend()
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "acoustics_field.png")
    fig.savefig(path, dpi=110)
    print("figure:", path)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="40 pairs, 60 steps (CI)")
    p.add_argument("--out", default="results/examples/acoustics")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    jaxcore.enable_compilation_cache()
    main(a.small, a.out, a.seed)
