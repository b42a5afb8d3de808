"""jaxcore.bnp."""
