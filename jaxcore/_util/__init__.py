"""Shared plumbing for jaxcore's families (not public API): checks, keys, cache, progress.

Nothing here is re-exported by ``jaxcore``; families import these helpers directly.
"""

from .cache import DataUnavailableError, cache_dir, cached_arrays
from .checks import (
    as_float_array,
    check_auto_mesh,
    check_bool,
    check_choice,
    check_finite,
    check_int,
    check_ndim,
    check_nonnegative,
    check_positive,
    check_range,
    check_scalar,
    check_shape,
    default_float,
    describe,
    error_if,
    expected,
    is_concrete,
    is_trusted,
    trusted_values,
)
from .keys import check_key, is_key
from .progress import Progress, ProgressArg, check_progress, report_every

__all__ = [
    "DataUnavailableError",
    "Progress",
    "ProgressArg",
    "as_float_array",
    "cache_dir",
    "cached_arrays",
    "check_auto_mesh",
    "check_bool",
    "check_choice",
    "check_finite",
    "check_int",
    "check_key",
    "check_ndim",
    "check_nonnegative",
    "check_positive",
    "check_progress",
    "check_range",
    "check_scalar",
    "check_shape",
    "default_float",
    "describe",
    "error_if",
    "expected",
    "is_concrete",
    "is_key",
    "is_trusted",
    "report_every",
    "trusted_values",
]
