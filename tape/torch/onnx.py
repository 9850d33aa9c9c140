"""``torch.onnx``: ``export`` is tape/onnx.py's (its own signature: see docs/porting.md)."""

from tape.onnx import export  # noqa: F401
