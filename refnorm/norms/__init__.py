"""Layer 1: the reference core. One module per normalizer, pure float64 functions, explicit state."""
