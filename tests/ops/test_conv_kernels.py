"""The convolution kernels (ops/_kernels/conv.py) on every path they take, against PyTorch in float64: images in
blocks of several, an image in bands of output rows (a block smaller than one image), the blocks on the worker
pool, the forward's GEMM split over the first kernel axis; column buffers reused across calls of other
geometries (their padding entries must be zeros again); inf and NaN in the input, the weight and the upstream
gradient; and the same result on every run."""

import warnings

import numpy as np
import pytest

import ops
import tape
from ops._kernels import conv as conv_kernels

CASES = [  # (name, input shape, weight shape, attributes)
    ("conv2d", (3, 4, 7, 6), (5, 4, 3, 3), dict(padding=1)),
    ("conv2d", (3, 4, 9, 8), (6, 2, 3, 2), dict(groups=2, stride=2, padding=(2, 1), dilation=(2, 1))),
    ("conv2d", (2, 3, 6, 7), (4, 3, 2, 4), dict(padding="same", dilation=2)),
    ("conv1d", (3, 2, 11), (4, 2, 3), dict(stride=3, padding=2)),
    ("conv3d", (2, 4, 4, 5, 3), (2, 2, 2, 3, 2), dict(groups=2, stride=(1, 2, 1), padding=1)),
    ("conv_transpose2d", (3, 4, 4, 5), (4, 3, 3, 2), dict(groups=2, stride=2, padding=1, output_padding=1)),
    ("conv_transpose1d", (2, 3, 6), (3, 2, 3), dict(dilation=2, padding=1, output_padding=1)),
    ("conv_transpose3d", (2, 2, 3, 2, 3), (2, 3, 2, 2, 2), dict(stride=2)),
]
PATHS = {
    "whole images": dict(),
    "bands of rows": dict(block_bytes=64),
    "pool": dict(workers=2),
    "pool, bands": dict(workers=2, block_bytes=64),
    "rows split": dict(split_rows=1),
    "rows split, pool, bands": dict(split_rows=1, workers=2, block_bytes=64),
}


def run_both(torch, name, x, w, b, upstream, attrs):
    """(output, dx, dw, db) of minitape's op and of torch's."""
    mt = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = getattr(ops, name)(*mt, **attrs)
    out.backward(upstream)
    th = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that padding='same' with an even kernel copies
        expected = getattr(torch.nn.functional, name)(*th, **attrs)
    expected.backward(torch.from_numpy(upstream))
    ours = [out.numpy()] + [t.grad.numpy() for t in mt]
    return ours, [expected.detach().numpy()] + [t.grad.numpy() for t in th]


def arrays(name, x_shape, w_shape, attrs, seed=0):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    out_channels = w_shape[1] * attrs.get("groups", 1) if "transpose" in name else w_shape[0]
    return x, w, rng.standard_normal(out_channels)


def force(monkeypatch, block_bytes=None, workers=None, split_rows=None):
    if split_rows is not None:
        monkeypatch.setattr(conv_kernels, "SPLIT_ROWS", split_rows)
    if block_bytes is not None:
        monkeypatch.setattr(conv_kernels, "BLOCK_BYTES", block_bytes)
    if workers is not None:
        monkeypatch.setattr(conv_kernels, "_workers", lambda flops: workers)


@pytest.mark.parametrize("path", PATHS, ids=str)
@pytest.mark.parametrize("name, x_shape, w_shape, attrs", CASES, ids=lambda c: str(c))
def test_every_blocking_and_the_pool_match_torch(torch, monkeypatch, path, name, x_shape, w_shape, attrs):
    force(monkeypatch, **PATHS[path])
    x, w, b = arrays(name, x_shape, w_shape, attrs)
    out_shape = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(w), **attrs).shape
    upstream = np.random.default_rng(1).standard_normal(tuple(out_shape))
    ours, theirs = run_both(torch, name, x, w, b, upstream, attrs)
    for what, a, e in zip(("output", "dx", "dw", "db"), ours, theirs):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12, err_msg=f"{name} {path}: {what}")


def test_a_reused_column_buffer_has_zeros_in_the_padding_again(torch):
    """Column buffers of 3x3 windows over 3x3 outputs: two images without padding (every entry an input value),
    then one image and then two with padding 1 on a smaller input -- the same taps as the one-image call but
    a second image's entries the first call filled: every padding entry must read 0, never an earlier value."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 2, 3, 3))
    calls = [((2, 2, 5, 5), 0), ((1, 2, 3, 3), 1), ((2, 2, 3, 3), 1)]
    for shape, padding in calls:
        x = rng.standard_normal(shape) + 10
        upstream = rng.standard_normal((shape[0], 3, 3, 3))
        ours, theirs = run_both(torch, "conv2d", x, w, np.zeros(3), upstream, dict(padding=padding))
        for what, a, e in zip(("output", "dx", "dw"), ours, theirs):
            np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12, err_msg=f"{shape}, padding {padding}: {what}")


@pytest.mark.parametrize("path", ["whole images", "pool, bands", "rows split"])
def test_inf_and_nan_propagate_as_in_torch(torch, monkeypatch, path):
    force(monkeypatch, **PATHS[path])
    x, w, b = arrays("conv2d", (2, 3, 6, 5), (4, 3, 3, 3), {}, seed=3)
    x[0, 1, 0, 0], x[1, 2, 3, 2], w[2, 1, 0, 2] = np.inf, np.nan, -np.inf
    upstream = np.random.default_rng(4).standard_normal((2, 4, 6, 5))
    upstream[0, 3, 2, 2] = 0.0
    ours, theirs = run_both(torch, "conv2d", x, w, b, upstream, dict(padding=1))
    for what, a, e in zip(("output", "dx", "dw", "db"), ours, theirs):
        assert np.array_equal(np.isnan(a), np.isnan(e)) and np.array_equal(np.isinf(a), np.isinf(e)), what
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12, err_msg=what)


def test_the_pool_gives_the_same_bits_every_run(monkeypatch):
    """Each block's weight gradient is summed in block order, whichever thread ran it."""
    force(monkeypatch, workers=2, block_bytes=256)
    x, w, b = arrays("conv2d", (6, 4, 8, 8), (5, 4, 3, 3), {}, seed=5)
    x, w, b = (a.astype(np.float32) for a in (x, w, b))
    upstream = np.random.default_rng(6).standard_normal((6, 5, 8, 8)).astype(np.float32)
    runs = []
    for _ in range(4):
        mt = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = ops.conv2d(*mt, padding=1)
        out.backward(upstream)
        runs.append([out.numpy()] + [t.grad.numpy() for t in mt])
    for run in runs[1:]:
        for a, e in zip(run, runs[0]):
            assert np.array_equal(a, e)
