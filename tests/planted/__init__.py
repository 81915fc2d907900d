"""Planted backends: an emulated fused float32 kernel (``emulated.EmulatedBackend``) that passes the
checker on every golden case of its ops, and one mutation per real pitfall of docs/pitfalls.md
(``pitfalls.PLANTED``) that the checker must catch. ``report.write`` publishes which case caught which
(docs/pitfall_detection.md)."""
