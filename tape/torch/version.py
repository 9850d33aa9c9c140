"""``torch.version``: ``cuda`` and ``hip`` are None (no GPU build), so programs take their CPU branch."""

cuda = None
hip = None
