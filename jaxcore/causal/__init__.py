"""jaxcore.causal."""
