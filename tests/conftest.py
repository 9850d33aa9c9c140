"""Shared test policy: PyTorch is the oracle, and an oracle that cannot run is a failure, not a skip.

``torch`` (the fixture) gives the torch module. Without torch installed the tests that need it FAIL, unless
``MINITAPE_ALLOW_NO_TORCH=1`` says to skip them knowingly. The policy is written once, in
``tests/oracle.py::require_torch``; this fixture and the generated tests both call it.

``ort`` (the fixture) gives onnxruntime, under the same policy as Graphviz below with ``MINITAPE_REQUIRE_ONNX=1``.

Graphviz: tests that render with ``dot`` skip with a reason when it is missing, except where
``MINITAPE_REQUIRE_DOT=1`` (CI sets it after installing Graphviz) turns that skip into a failure.
"""

import importlib.util
import os
import shutil

import pytest
from oracle import require_torch


@pytest.fixture
def torch():
    return require_torch()


@pytest.fixture
def graphviz_dot():
    """Skip (or, with MINITAPE_REQUIRE_DOT=1, fail) when Graphviz's ``dot`` program is missing."""
    if shutil.which("dot") is None:
        message = "Graphviz's `dot` program is not installed (apt-get install graphviz)"
        if os.environ.get("MINITAPE_REQUIRE_DOT") == "1":
            pytest.fail(message + "; MINITAPE_REQUIRE_DOT=1 requires it")
        pytest.skip(message)


@pytest.fixture(scope="module")
def ort():
    """onnxruntime; skip (or, with MINITAPE_REQUIRE_ONNX=1, fail) without it or without onnx."""
    if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
        message = "onnx / onnxruntime are not installed (pip install -e '.[onnx]')"
        if os.environ.get("MINITAPE_REQUIRE_ONNX") == "1":
            pytest.fail(message + "; MINITAPE_REQUIRE_ONNX=1 requires them")
        pytest.skip(message)
    import onnxruntime

    return onnxruntime
