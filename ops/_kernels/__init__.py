"""Private numerical kernels the op families call (not ops themselves)."""
