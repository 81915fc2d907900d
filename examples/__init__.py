"""Examples for refnorm users (not installed with the package): ``tiny_backend`` is a complete backend."""
