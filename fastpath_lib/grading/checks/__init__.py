"""The checks: one module per exercise, each ending in ``graded(...)``."""
