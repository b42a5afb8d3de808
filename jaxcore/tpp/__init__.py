"""jaxcore.tpp."""
