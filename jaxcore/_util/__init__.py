"""jaxcore._util."""
