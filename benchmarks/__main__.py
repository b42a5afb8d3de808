import os
import sys

# Baselines run interleaved with JAX kernels in one process. OpenMP runtimes (PyTorch's, OpenBLAS's)
# spin-wait after each call by default, stealing the cores from the JAX kernel timed next; passive
# waiting removes that bias. It must be set before any OpenMP runtime starts, hence here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli import main  # noqa: E402

sys.exit(main())
