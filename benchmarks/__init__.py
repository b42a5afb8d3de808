"""jaxcore's benchmark suite: ``python -m benchmarks --help``.

Suites live in :mod:`benchmarks.suites`, one module per family; each declares
its benchmarks with :func:`benchmarks.registry.register`.
"""
