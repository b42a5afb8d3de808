import os
import sys

# Baselines run interleaved with JAX kernels in one process. OpenMP runtimes (PyTorch's, OpenBLAS's)
# spin-wait after each call by default, stealing the cores from the JAX kernel timed next; passive
# waiting removes that bias. It must be set before any OpenMP runtime starts, hence here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli import main  # noqa: E402

code = main()
# Every result is already on disk (written atomically after each benchmark). Leave without the
# interpreter's teardown: a benchmark stopped by its time limit can leave an XLA compilation running
# in a background thread, and tearing the runtime down under it was seen to crash the process.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
