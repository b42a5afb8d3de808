"""One module per family; each registers its benchmarks when imported."""
