"""The RMSNorm fast path: predicate (no GPU imports), kernels (Triton), op (dispatch), module."""
