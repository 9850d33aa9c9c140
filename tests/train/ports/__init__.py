"""PyTorch programs for tests/train/test_port.py's import-swap ports: each is ordinary torch code, run once as it is
and once with only its import lines rewritten to ``tape.torch``."""
