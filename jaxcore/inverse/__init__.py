"""jaxcore.inverse."""
