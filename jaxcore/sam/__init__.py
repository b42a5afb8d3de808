"""jaxcore.sam."""
