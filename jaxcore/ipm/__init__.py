"""jaxcore.ipm."""
