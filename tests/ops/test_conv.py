"""Convolution (1-D, 2-D, 3-D), transposed convolution, unfold / fold, pooling (max, avg, 1-D, adaptive, with
indices, unpooling) and interpolate against PyTorch at sizes a little beyond the generated samples (batch 2, 3
channels, 9x9) in float32 and float64, over combinations of their options; their second order (Hessian-vector
products against torch's double backward); empty batches; max pooling's tie choice and indices; interpolate's
index arithmetic over many sizes and scale factors; and the errors bad arguments raise."""

import itertools
import warnings

import numpy as np
import pytest
from oracle import LazyTorch, run_torch_hvp_parity

import ops
import tape
from tape.registry import Sample

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional

TOLERANCE = {np.float64: dict(rtol=1e-7, atol=1e-9), np.float32: dict(rtol=2e-4, atol=2e-5)}


def compare_with_torch(ours, theirs, arrays, dtype, seed=0):
    """Run ``ours`` and ``theirs`` on the same arrays (all differentiable; None = absent), backward with the
    same random upstream gradient, and assert outputs and every input gradient agree."""
    arrays = [None if a is None else a.astype(dtype) for a in arrays]
    mt = [None if a is None else tape.tensor(a, requires_grad=True, dtype=a.dtype) for a in arrays]
    th = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    out = ours(*mt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's padding='same' with an even kernel warns about a copy
        expected = theirs(*th)
    assert out.shape == tuple(expected.shape) and out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **TOLERANCE[dtype])
    upstream = np.random.default_rng(seed).standard_normal(out.shape).astype(dtype)
    out.backward(upstream)
    expected.backward(torch.from_numpy(upstream))
    for name, t, e in zip("xwb", mt, th):
        if t is not None:
            assert t.grad.dtype == np.dtype(dtype), name
            np.testing.assert_allclose(t.grad.numpy(), e.grad.numpy(), err_msg=f"gradient of {name}",
                                       **TOLERANCE[dtype])


CONV2D_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=(2, 1), padding=(1, 2)),
    dict(padding=1, dilation=2),
    dict(padding="same"),
    dict(padding="same", dilation=(1, 2)),
    dict(padding="valid", stride=3),
    dict(stride=2, padding=2, dilation=(2, 3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", CONV2D_CASES, ids=str)
@pytest.mark.parametrize("groups, out_channels, kernel", [(1, 4, (3, 3)), (3, 6, (2, 3)), (3, 3, (3, 3))],
                         ids=["dense", "groups3", "depthwise"])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_matches_torch(dtype, kwargs, groups, out_channels, kernel, bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 9))
    w = rng.standard_normal((out_channels, 3 // groups) + kernel)
    b = rng.standard_normal(out_channels) if bias else None
    compare_with_torch(lambda x, w, b: ops.conv2d(x, w, b, groups=groups, **kwargs),
                       lambda x, w, b: F.conv2d(x, w, b, groups=groups, **kwargs), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_unbatched_and_non_contiguous(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 8, 3)).transpose(2, 0, 1)  # (C, H, W), channels last in memory
    w = rng.standard_normal((3, 4, 3, 5)).transpose(3, 2, 0, 1)  # (5, 3, 3, 4)
    compare_with_torch(lambda x, w: ops.conv2d(x, w, padding=1), lambda x, w: F.conv2d(x, w, padding=1),
                       [x, w], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2, padding=1), dict(padding="same", dilation=2),
                                    dict(groups=3, padding="valid"), dict(stride=(3,), padding=(2,), dilation=(2,))],
                         ids=str)
def test_conv1d_matches_torch(dtype, kwargs):
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((2, 3, 11)), rng.standard_normal((6, 3 // kwargs.get("groups", 1), 3)), \
        rng.standard_normal(6)
    compare_with_torch(lambda x, w, b: ops.conv1d(x, w, b, **kwargs), lambda x, w, b: F.conv1d(x, w, b, **kwargs),
                       [x, w, b], dtype)
    compare_with_torch(lambda x, w: ops.conv1d(x, w, **kwargs), lambda x, w: F.conv1d(x, w, **kwargs),
                       [x[0], w], dtype)  # unbatched (C, L)


POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", POOL_CASES + [dict(kernel_size=2, dilation=2), dict(kernel_size=3, dilation=(2, 1),
                                                                                      padding=1, ceil_mode=True)],
                         ids=str)
def test_max_pool2d_matches_torch(dtype, kwargs):
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 9))
    compare_with_torch(lambda x: ops.max_pool2d(x, **kwargs), lambda x: F.max_pool2d(x, **kwargs), [x], dtype)
    compare_with_torch(lambda x: ops.max_pool2d(x, **kwargs), lambda x: F.max_pool2d(x, **kwargs), [x[0]], dtype)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                                    dict(kernel_size=3, stride=2, ceil_mode=True)], ids=str)
def test_max_pool2d_ties_send_the_gradient_where_torch_does(kwargs):
    # small integers: most windows hold several equal maxima; torch's CPU kernel picks the first in
    # row-major (kh, kw) order, and so do we
    x = np.random.default_rng(4).integers(-1, 2, size=(2, 3, 9, 9)).astype(float)
    compare_with_torch(lambda x: ops.max_pool2d(x, **kwargs), lambda x: F.max_pool2d(x, **kwargs), [x], np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", POOL_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_matches_torch(dtype, kwargs, count_include_pad):
    x = np.random.default_rng(5).standard_normal((2, 3, 9, 9))
    kwargs = dict(kwargs, count_include_pad=count_include_pad)
    compare_with_torch(lambda x: ops.avg_pool2d(x, **kwargs), lambda x: F.avg_pool2d(x, **kwargs), [x], dtype)


def test_avg_pool2d_divisor_override_and_unbatched():
    x = np.random.default_rng(6).standard_normal((3, 9, 9))
    kwargs = dict(kernel_size=3, stride=2, padding=1, divisor_override=4)
    compare_with_torch(lambda x: ops.avg_pool2d(x, **kwargs), lambda x: F.avg_pool2d(x, **kwargs), [x], np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(scale_factor=3), dict(scale_factor=(2, 3)),
                                    dict(scale_factor=1.5), dict(scale_factor=0.5), dict(size=(13, 20)),
                                    dict(size=5), dict(size=(9, 27))], ids=str)
def test_upsample2d_matches_torch_nearest(dtype, kwargs):
    x = np.random.default_rng(7).standard_normal((2, 3, 9, 9))
    compare_with_torch(lambda x: ops.upsample2d(x, **kwargs),
                       lambda x: F.interpolate(x, mode="nearest", **kwargs), [x], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1),
                                    dict(kernel_size=2, dilation=(2, 3), padding=(0, 2)),
                                    dict(kernel_size=(3, 1), stride=(2, 1), dilation=2, padding=2)], ids=str)
def test_unfold_and_fold_match_torch(dtype, kwargs):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 9, 8))
    compare_with_torch(lambda x: ops.unfold(x, **kwargs), lambda x: F.unfold(x, **kwargs), [x], dtype)
    compare_with_torch(lambda x: ops.unfold(x, **kwargs), lambda x: F.unfold(x, **kwargs), [x[0]], dtype)
    cols = F.unfold(torch.tensor(x), **kwargs).numpy()
    compare_with_torch(lambda c: ops.fold(c, (9, 8), **kwargs), lambda c: F.fold(c, (9, 8), **kwargs), [cols], dtype)
    compare_with_torch(lambda c: ops.fold(c, (9, 8), **kwargs), lambda c: F.fold(c, (9, 8), **kwargs), [cols[1]],
                       dtype)


EMPTY_BATCH = [
    ("conv2d", lambda lib, x, w, b: _f(lib).conv2d(x, w, b, padding=1, stride=2), [(0, 3, 6, 6), (4, 3, 3, 3), (4,)]),
    ("conv2d same, groups", lambda lib, x, w: _f(lib).conv2d(x, w, padding="same", groups=3),
     [(0, 3, 5, 5), (6, 1, 2, 2)]),
    ("conv1d", lambda lib, x, w, b: _f(lib).conv1d(x, w, b, dilation=2), [(0, 2, 9), (3, 2, 3), (3,)]),
    ("conv3d", lambda lib, x, w, b: _f(lib).conv3d(x, w, b, padding=(1, 0, 1), stride=(2, 1, 1)),
     [(0, 2, 4, 3, 3), (3, 2, 2, 2, 2), (3,)]),
    ("max_pool2d", lambda lib, x: _f(lib).max_pool2d(x, 3, 2, 1, ceil_mode=True), [(0, 2, 7, 7)]),
    ("avg_pool2d", lambda lib, x: _f(lib).avg_pool2d(x, 2, count_include_pad=False, padding=1), [(0, 2, 5, 5)]),
    ("upsample2d", lambda lib, x: ops.upsample2d(x, scale_factor=2) if lib is ops else
     F.interpolate(x, scale_factor=2, mode="nearest"), [(0, 2, 3, 3)]),
    ("unfold", lambda lib, x: _f(lib).unfold(x, 2, padding=1), [(0, 2, 4, 4)]),
    ("fold", lambda lib, x: _f(lib).fold(x, (4, 4), 2, stride=2), [(0, 8, 4)]),
]


def _f(lib):
    return F if lib is torch else ops


@pytest.mark.parametrize("name, fn, shapes", EMPTY_BATCH, ids=[c[0] for c in EMPTY_BATCH])
def test_empty_batch_works_forward_and_backward_as_in_torch(name, fn, shapes):
    rng = np.random.default_rng(9)
    compare_with_torch(lambda *xs: fn(ops, *xs), lambda *xs: fn(torch, *xs),
                       [rng.standard_normal(s) for s in shapes], np.float64)


# -- second order ------------------------------------------------------------------------------------------
def assert_hvp_matches_torch(name, arrays, **attrs):
    result = run_torch_hvp_parity(tape.get_op(name), Sample(tuple(arrays), attrs))
    assert result is not None, f"{name}: torch compared nothing"
    assert result.ok, result.message


@pytest.mark.parametrize("kwargs", CONV2D_CASES, ids=str)
@pytest.mark.parametrize("groups, out_channels, kernel", [(1, 4, (3, 3)), (3, 6, (2, 3))], ids=["dense", "groups3"])
def test_conv2d_second_order_matches_torch(kwargs, groups, out_channels, kernel):
    rng = np.random.default_rng(10)
    x, w, b = rng.standard_normal((2, 3, 7, 7)), rng.standard_normal((out_channels, 3 // groups) + kernel), \
        rng.standard_normal(out_channels)
    assert_hvp_matches_torch("conv2d", [x, w, b], groups=groups, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2, padding=1), dict(padding="same", dilation=2),
                                    dict(groups=3, padding="valid")], ids=str)
def test_conv1d_second_order_matches_torch(kwargs):
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((2, 3, 9)), rng.standard_normal((6, 3 // kwargs.get("groups", 1), 4))
    assert_hvp_matches_torch("conv1d", [x, w, rng.standard_normal(6)], **kwargs)
    assert_hvp_matches_torch("conv1d", [x[0], w, None], **kwargs)


@pytest.mark.parametrize("kwargs", POOL_CASES, ids=str)
def test_pooling_second_order_matches_torch(kwargs):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 2, 7, 7))
    assert_hvp_matches_torch("max_pool2d", [x], **kwargs)
    for count_include_pad in (True, False):
        assert_hvp_matches_torch("avg_pool2d", [x], count_include_pad=count_include_pad, **kwargs)


def test_max_pool2d_second_order_routes_ties_where_torch_does():
    x = np.random.default_rng(4).integers(-1, 2, size=(2, 3, 7, 7)).astype(float)
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1)):
        assert_hvp_matches_torch("max_pool2d", [x], **kwargs)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=2,
                                                                          dilation=(2, 1))], ids=str)
def test_unfold_fold_second_order_matches_torch(kwargs):
    x = np.random.default_rng(13).standard_normal((2, 2, 6, 7))
    assert_hvp_matches_torch("unfold", [x], **kwargs)
    cols = F.unfold(torch.tensor(x), **kwargs).numpy()
    assert_hvp_matches_torch("fold", [cols], output_size=(6, 7), **kwargs)


# -- errors ------------------------------------------------------------------------------------------------
x4 = np.zeros((2, 4, 6, 6))
w4 = np.zeros((8, 4, 3, 3))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ops.conv2d(np.zeros((4, 6)), w4), ValueError, "conv2d: argument 'input'"),
    (lambda: ops.conv2d(x4, np.zeros((8, 4, 3))), ValueError, "conv2d: argument 'weight'"),
    (lambda: ops.conv2d(x4, np.zeros((8, 3, 3, 3))), ValueError, "conv2d: argument 'weight'.*4 channels"),
    (lambda: ops.conv2d(x4, np.zeros((8, 2, 3, 3)), groups=3), ValueError, "conv2d: argument 'groups'"),
    (lambda: ops.conv2d(x4, np.zeros((6, 1, 3, 3)), groups=4), ValueError, "conv2d: argument 'groups'"),
    (lambda: ops.conv2d(x4, np.zeros((8, 4, 7, 3))), ValueError, "conv2d: argument 'weight'.*padded input"),
    (lambda: ops.conv2d(x4, w4, dilation=4), ValueError, "conv2d: argument 'weight'.*padded input"),
    (lambda: ops.conv2d(x4, w4, np.zeros(4)), ValueError, "conv2d: argument 'bias'"),
    (lambda: ops.conv2d(x4, w4, stride=0), ValueError, "conv2d: argument 'stride'"),
    (lambda: ops.conv2d(x4, w4, padding=-1), ValueError, "conv2d: argument 'padding'"),
    (lambda: ops.conv2d(x4, w4, padding="full"), ValueError, "conv2d: argument 'padding'"),
    (lambda: ops.conv2d(x4, w4, padding="same", stride=2), ValueError, "conv2d: argument 'padding'"),
    (lambda: ops.conv2d(x4.astype(np.int64), w4.astype(np.int64)), TypeError, "conv2d: argument 'input'"),
    (lambda: ops.conv1d(np.zeros((2, 4, 6)), np.zeros((3, 4, 8))), ValueError, "conv1d: argument 'weight'"),
    (lambda: ops.conv1d(x4, np.zeros((3, 4, 2))), ValueError, "conv1d: argument 'input'"),
    (lambda: ops.max_pool2d(np.zeros(6), 2), ValueError, "max_pool2d: argument 'input'"),
    (lambda: ops.max_pool2d(x4, 2, padding=2), ValueError, "max_pool2d: argument 'padding'"),
    (lambda: ops.max_pool2d(x4, 7), ValueError, "max_pool2d: argument 'input'"),
    (lambda: ops.max_pool2d(x4, (2, 2, 2)), ValueError, "max_pool2d: argument 'kernel_size'"),
    (lambda: ops.max_pool2d(np.zeros((1, 6, 6), dtype=np.int32), 2), TypeError, "max_pool2d: argument 'input'"),
    (lambda: ops.avg_pool2d(x4, 2, padding=2), ValueError, "avg_pool2d: argument 'padding'"),
    (lambda: ops.avg_pool2d(x4, 2, divisor_override=0), ValueError, "avg_pool2d: argument 'divisor_override'"),
    (lambda: ops.upsample2d(x4), ValueError, "upsample2d: argument 'size / scale_factor'"),
    (lambda: ops.upsample2d(x4, scale_factor=2, size=4), ValueError, "upsample2d: argument 'size / scale_factor'"),
    (lambda: ops.upsample2d(x4, scale_factor=-1), ValueError, "upsample2d: argument 'scale_factor'"),
    (lambda: ops.upsample2d(x4[0], scale_factor=2), ValueError, "upsample2d: argument 'input'"),
    (lambda: ops.unfold(np.zeros((4, 6)), 2), ValueError, "unfold: argument 'input'"),
    (lambda: ops.unfold(x4, 7), ValueError, "unfold: argument 'kernel_size'"),
    (lambda: ops.unfold(x4, 2, stride=0), ValueError, "unfold: argument 'stride'"),
    (lambda: ops.fold(np.zeros((1, 8, 8)), (4, 4), 2), ValueError, "fold: argument 'input'.*blocks"),
    (lambda: ops.fold(np.zeros((1, 7, 9)), (4, 4), 2, stride=1), ValueError, "fold: argument 'input'.*divisible"),
    (lambda: ops.fold(np.zeros((1, 8, 4)), (4,), 2, stride=2), ValueError, "fold: argument 'output_size'"),
])
def test_bad_arguments_raise_naming_op_and_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_pooling_flags_must_be_bools():
    with pytest.raises(TypeError, match="avg_pool2d: argument 'count_include_pad'"):
        ops.avg_pool2d(x4, 2, count_include_pad="yes")
    with pytest.raises(TypeError, match="max_pool2d: argument 'ceil_mode'"):
        ops.max_pool2d(x4, 2, ceil_mode=1)


# -- transposed convolution --------------------------------------------------------------------------------
CONV_TRANSPOSE2D_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(3, 2), padding=(2, 1), output_padding=(2, 0)),
    dict(dilation=2, padding=1),
    dict(dilation=3, output_padding=2),  # output_padding >= stride but < dilation: torch allows it
    dict(stride=2, padding=2, dilation=(2, 3), output_padding=(1, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", CONV_TRANSPOSE2D_CASES, ids=str)
@pytest.mark.parametrize("groups, out_per_group, kernel", [(1, 4, (3, 3)), (3, 2, (2, 3)), (3, 1, (3, 3))],
                         ids=["dense", "groups3", "depthwise"])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose2d_matches_torch(dtype, kwargs, groups, out_per_group, kernel, bias):
    rng = np.random.default_rng(20)
    x = rng.standard_normal((2, 3, 6, 5))
    w = rng.standard_normal((3, out_per_group) + kernel)
    b = rng.standard_normal(out_per_group * groups) if bias else None
    compare_with_torch(lambda x, w, b: ops.conv_transpose2d(x, w, b, groups=groups, **kwargs),
                       lambda x, w, b: F.conv_transpose2d(x, w, b, groups=groups, **kwargs), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2, padding=1, output_padding=1), dict(groups=3, dilation=2),
                                    dict(stride=(3,), padding=(2,), output_padding=(1,), dilation=(2,))], ids=str)
def test_conv_transpose1d_matches_torch(dtype, kwargs):
    rng = np.random.default_rng(21)
    x, w, b = rng.standard_normal((2, 3, 8)), rng.standard_normal((3, 2, 3)), rng.standard_normal(
        2 * kwargs.get("groups", 1))
    compare_with_torch(lambda x, w, b: ops.conv_transpose1d(x, w, b, **kwargs),
                       lambda x, w, b: F.conv_transpose1d(x, w, b, **kwargs), [x, w, b], dtype)
    compare_with_torch(lambda x, w: ops.conv_transpose1d(x, w, **kwargs),
                       lambda x, w: F.conv_transpose1d(x, w, **kwargs), [x[0], w], dtype)  # unbatched


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for the same stride / padding / dilation / groups
    rng = np.random.default_rng(22)
    x, w = rng.standard_normal((2, 4, 9, 8)), rng.standard_normal((6, 2, 3, 2))
    attrs = dict(stride=2, padding=1, dilation=(1, 2), groups=2)
    y = rng.standard_normal(ops.conv2d(x, w, **attrs).shape)
    back = ops.conv_transpose2d(y, w, output_padding=(0, 1), **attrs).numpy()
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(ops.conv2d(x, w, **attrs).numpy() * y), np.sum(x * back), rtol=1e-12)


@pytest.mark.parametrize("kwargs", CONV_TRANSPOSE2D_CASES[1:], ids=str)
def test_conv_transpose_second_order_matches_torch(kwargs):
    rng = np.random.default_rng(23)
    x, w, b = rng.standard_normal((2, 4, 4, 5)), rng.standard_normal((4, 3, 2, 3)), rng.standard_normal(6)
    assert_hvp_matches_torch("conv_transpose2d", [x, w, b], groups=2, **kwargs)
    assert_hvp_matches_torch("conv_transpose1d", [x[:, :, 0], w[:, :, 0], None], groups=2,
                             **{k: v if isinstance(v, int) else v[1] for k, v in kwargs.items()})


# -- 1-D pooling -------------------------------------------------------------------------------------------
POOL1D_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=4, stride=3, padding=2,
                                                                                     ceil_mode=True),
                dict(kernel_size=(3,), stride=(1,), padding=(1,))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", POOL1D_CASES, ids=str)
def test_pool1d_matches_torch(dtype, kwargs):
    x = np.random.default_rng(24).standard_normal((2, 3, 11))
    for extra in (dict(), dict(dilation=2)):
        compare_with_torch(lambda x, extra=extra: ops.max_pool1d(x, **kwargs, **extra),
                           lambda x, extra=extra: F.max_pool1d(x, **kwargs, **extra), [x], dtype)
    for include in (True, False):
        compare_with_torch(lambda x, include=include: ops.avg_pool1d(x, count_include_pad=include, **kwargs),
                           lambda x, include=include: F.avg_pool1d(x, count_include_pad=include, **kwargs), [x[0]],
                           dtype)
    assert_hvp_matches_torch("max_pool1d", [x], **kwargs)
    assert_hvp_matches_torch("avg_pool1d", [x], **kwargs)


def test_max_pool1d_ties_send_the_gradient_where_torch_does():
    x = np.random.default_rng(25).integers(-1, 2, size=(2, 3, 12)).astype(float)
    compare_with_torch(lambda x: ops.max_pool1d(x, 3, 1, 1), lambda x: F.max_pool1d(x, 3, 1, 1), [x], np.float64)


# -- pooling with indices, unpooling -----------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", POOL_CASES + [dict(kernel_size=2, dilation=2, padding=1)], ids=str)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_max_pool2d_with_indices_matches_torch_values_indices_and_gradient(kwargs, ties):
    rng = np.random.default_rng(26)
    x = rng.integers(-1, 2, size=(2, 3, 9, 9)).astype(float) if ties else rng.standard_normal((2, 3, 9, 9))
    t = tape.tensor(x, requires_grad=True)
    values, indices = ops.max_pool2d_with_indices(t, **kwargs)
    tx = torch.tensor(x, requires_grad=True)
    expected, expected_indices = F.max_pool2d(tx, return_indices=True, **kwargs)
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(values.numpy(), expected.detach().numpy())
    upstream = rng.standard_normal(values.shape)
    values.backward(upstream)
    expected.backward(torch.tensor(upstream))
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs, output_size", [(dict(kernel_size=2), (9, 9)), (dict(kernel_size=3, stride=2), None),
                                                 (dict(kernel_size=3, stride=2, padding=1), (1, 1, 9, 9)),
                                                 (dict(kernel_size=(2, 3), stride=(2, 3)), [9, 9])], ids=str)
def test_max_unpool2d_inverts_max_pool2d_as_torch(dtype, kwargs, output_size):
    x = torch.tensor(np.random.default_rng(27).standard_normal((2, 3, 9, 9)))
    pooled, indices = F.max_pool2d(x, return_indices=True, **kwargs)
    compare_with_torch(lambda v: ops.max_unpool2d(v, indices.numpy(), output_size=output_size, **kwargs),
                       lambda v: F.max_unpool2d(v, indices, output_size=output_size, **kwargs), [pooled.numpy()],
                       dtype)
    assert_hvp_matches_torch("max_unpool2d", [pooled.numpy(), indices.numpy()], output_size=output_size, **kwargs)


# -- adaptive pooling --------------------------------------------------------------------------------------
ADAPTIVE_SIZES = [1, 3, 4, 7, 9, 12, (5, None), (2, 8)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("output_size", ADAPTIVE_SIZES, ids=str)
def test_adaptive_pooling_matches_torch(dtype, output_size):
    x = np.random.default_rng(28).standard_normal((2, 3, 9, 7))
    compare_with_torch(lambda x: ops.adaptive_avg_pool2d(x, output_size),
                       lambda x: F.adaptive_avg_pool2d(x, output_size), [x], dtype)
    compare_with_torch(lambda x: ops.adaptive_max_pool2d(x, output_size),
                       lambda x: F.adaptive_max_pool2d(x, output_size), [x[0]], dtype)
    size1d = output_size[0] if isinstance(output_size, tuple) else output_size
    compare_with_torch(lambda x: ops.adaptive_avg_pool1d(x, size1d), lambda x: F.adaptive_avg_pool1d(x, size1d),
                       [x[:, :, 0]], dtype)


@pytest.mark.parametrize("output_size", [3, 4, (5, 2), 12], ids=str)
def test_adaptive_max_pool2d_indices_and_ties_as_torch(output_size):
    x = np.random.default_rng(29).integers(-1, 2, size=(2, 3, 9, 7)).astype(float)
    _, indices = ops.adaptive_max_pool2d_with_indices(x, output_size)
    np.testing.assert_array_equal(indices.numpy(), F.adaptive_max_pool2d(torch.tensor(x), output_size, True)[1])
    compare_with_torch(lambda x: ops.adaptive_max_pool2d(x, output_size),
                       lambda x: F.adaptive_max_pool2d(x, output_size), [x], np.float64)
    compare_with_torch(lambda x: ops.adaptive_max_pool2d_with_indices(x, output_size)[0],
                       lambda x: F.adaptive_max_pool2d(x, output_size, True)[0], [x], np.float64)


@pytest.mark.parametrize("output_size", [3, (4, 5)], ids=str)
def test_adaptive_pooling_second_order_matches_torch(output_size):
    x = np.random.default_rng(30).standard_normal((2, 2, 7, 6))
    for name in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
        assert_hvp_matches_torch(name, [x], output_size=output_size)
    assert_hvp_matches_torch("adaptive_avg_pool1d", [x[:, :, 0]], output_size=4)


# -- interpolate -------------------------------------------------------------------------------------------
INTERPOLATE_RESIZES = ([dict(size=n) for n in (1, 2, 3, 4, 6, 9, 14, 26)]
                       + [dict(scale_factor=f) for f in (0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 1.7, 2, 2.1, 2.5, 3, 4 / 3)]
                       + [dict(scale_factor=f, recompute_scale_factor=True) for f in (0.7, 1.3, 2.1)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("nearest-exact", None), ("linear", False),
                                                 ("linear", True), ("bilinear", False), ("bilinear", True)])
def test_interpolate_index_arithmetic_matches_torch(dtype, mode, align_corners):
    # every input size against every output size / scale factor: the float32 index arithmetic
    # (floor of src boundaries) must agree exactly with torch's
    rng = np.random.default_rng(31)
    ranks = {"linear": (3,), "bilinear": (4,)}.get(mode, (3, 4))  # torch's 1-D and 2-D nearest kernels differ
    for n, rank in itertools.product((1, 2, 3, 5, 7, 10, 13), ranks):
        shape = (2, 2, n) if rank == 3 else (2, 2, n, n + 1)
        x = rng.standard_normal(shape).astype(dtype)
        for resize in INTERPOLATE_RESIZES + ([dict(scale_factor=(1.3, 0.6))] if len(shape) == 4 else []):
            attrs = dict(resize, mode=mode, align_corners=align_corners)
            try:
                expected = F.interpolate(torch.tensor(x), **attrs).numpy()
            except RuntimeError:  # an output size of 0
                with pytest.raises(ValueError, match="interpolate: argument"):
                    ops.interpolate(x, **attrs)
                continue
            np.testing.assert_allclose(ops.interpolate(x, **attrs).numpy(), expected, err_msg=str((n, attrs)),
                                       **TOLERANCE[dtype])


@pytest.mark.parametrize("name", ["interpolate", "upsample2d"])
@pytest.mark.parametrize("factor", [np.float32(0.7), np.float32(0.3), np.float16(1.1), (np.float32(0.7), 1.3)],
                         ids=repr)
def test_numpy_scale_factors_size_the_output_as_torch(name, factor):
    # torch sizes an output floor(in * double(factor)): 10 * float32(0.7) is 7 in float32 but 6.99999988 in double
    x = np.random.default_rng(33).standard_normal((1, 2, 10, 20))
    expected = F.interpolate(torch.tensor(x), scale_factor=factor).numpy()
    np.testing.assert_array_equal(getattr(ops, name)(x, scale_factor=factor).numpy(), expected)


@pytest.mark.parametrize("attrs", [dict(scale_factor=1.7, mode="bilinear"),
                                   dict(size=(5, 13), mode="bilinear", align_corners=True),
                                   dict(scale_factor=(2, 0.5), mode="nearest"),
                                   dict(size=(4, 7), mode="nearest-exact")], ids=str)
def test_interpolate_gradients_and_second_order_match_torch(attrs):
    x = np.random.default_rng(32).standard_normal((2, 3, 6, 7))
    compare_with_torch(lambda x: ops.interpolate(x, **attrs), lambda x: F.interpolate(x, **attrs), [x], np.float64)
    compare_with_torch(lambda x: ops.interpolate(x, **attrs), lambda x: F.interpolate(x, **attrs), [x], np.float32)
    assert_hvp_matches_torch("interpolate", [x], **attrs)


NEW_EMPTY_BATCH = [
    ("conv_transpose2d", lambda lib, x, w, b: _f(lib).conv_transpose2d(x, w, b, stride=2, output_padding=1),
     [(0, 3, 4, 4), (3, 2, 3, 3), (2,)]),
    ("conv_transpose1d", lambda lib, x, w: _f(lib).conv_transpose1d(x, w, padding=1), [(0, 2, 5), (2, 3, 3)]),
    ("max_pool1d", lambda lib, x: _f(lib).max_pool1d(x, 3, 2, 1), [(0, 2, 7)]),
    ("avg_pool1d", lambda lib, x: _f(lib).avg_pool1d(x, 3, 2, 1), [(0, 2, 7)]),
    ("adaptive_avg_pool2d", lambda lib, x: _f(lib).adaptive_avg_pool2d(x, 3), [(0, 2, 5, 5)]),
    ("adaptive_max_pool2d", lambda lib, x: _f(lib).adaptive_max_pool2d(x, 3), [(0, 2, 5, 5)]),
    ("interpolate", lambda lib, x: _f(lib).interpolate(x, scale_factor=1.5, mode="bilinear"), [(0, 2, 3, 3)]),
]


@pytest.mark.parametrize("name, fn, shapes", NEW_EMPTY_BATCH, ids=[c[0] for c in NEW_EMPTY_BATCH])
def test_new_ops_empty_batch_forward_and_backward_as_in_torch(name, fn, shapes):
    rng = np.random.default_rng(33)
    compare_with_torch(lambda *xs: fn(ops, *xs), lambda *xs: fn(torch, *xs),
                       [rng.standard_normal(s) for s in shapes], np.float64)


x3 = np.zeros((2, 4, 6))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ops.conv_transpose2d(x4, np.zeros((3, 2, 3, 3))), ValueError, "conv_transpose2d: argument 'weight'"),
    (lambda: ops.conv_transpose2d(x4, np.zeros((4, 2, 3))), ValueError, "conv_transpose2d: argument 'weight'"),
    (lambda: ops.conv_transpose2d(x4, np.zeros((4, 2, 3, 3)), groups=3), ValueError,
     "conv_transpose2d: argument 'groups'"),
    (lambda: ops.conv_transpose2d(x4, np.zeros((4, 2, 3, 3)), np.zeros(2), groups=2), ValueError,
     "conv_transpose2d: argument 'bias'"),
    (lambda: ops.conv_transpose2d(x4, np.zeros((4, 2, 3, 3)), stride=2, output_padding=2), ValueError,
     "conv_transpose2d: argument 'output_padding'"),
    (lambda: ops.conv_transpose2d(x4, np.zeros((4, 2, 3, 3)), padding=5), ValueError,
     "conv_transpose2d: argument 'input'"),
    (lambda: ops.conv_transpose1d(x4, np.zeros((4, 2, 3))), ValueError, "conv_transpose1d: argument 'input'"),
    (lambda: ops.max_pool1d(x4, 2), ValueError, "max_pool1d: argument 'input'"),
    (lambda: ops.max_pool1d(x3, (2, 2)), ValueError, "max_pool1d: argument 'kernel_size'"),
    (lambda: ops.avg_pool1d(x3, 2, padding=2), ValueError, "avg_pool1d: argument 'padding'"),
    (lambda: ops.max_pool2d_with_indices(x4, 7), ValueError, "max_pool2d_with_indices: argument 'input'"),
    (lambda: ops.max_unpool2d(x4, np.zeros((2, 4, 6, 6)), 2), TypeError, "max_unpool2d: argument 'indices'"),
    (lambda: ops.max_unpool2d(x4, np.zeros((2, 4, 6, 5), np.int64), 2), ValueError,
     "max_unpool2d: argument 'indices'"),
    (lambda: ops.max_unpool2d(x4, np.full((2, 4, 6, 6), 144), 2), ValueError, "max_unpool2d: argument 'indices'"),
    (lambda: ops.max_unpool2d(x4, np.zeros((2, 4, 6, 6), np.int64), 2, output_size=(14, 12)), ValueError,
     "max_unpool2d: argument 'output_size'"),
    (lambda: ops.max_unpool2d(x4, np.zeros((2, 4, 6, 6), np.int64), 2, output_size=(4, 12, 12)), ValueError,
     "max_unpool2d: argument 'output_size'"),
    (lambda: ops.adaptive_avg_pool2d(x4, (2, 2, 2)), ValueError, "adaptive_avg_pool2d: argument 'output_size'"),
    (lambda: ops.adaptive_avg_pool1d(x4, 2), ValueError, "adaptive_avg_pool1d: argument 'input'"),
    (lambda: ops.adaptive_max_pool2d(x4, -1), ValueError, "adaptive_max_pool2d: argument 'output_size'"),
    (lambda: ops.interpolate(x4, scale_factor=2, mode="linear"), ValueError, "interpolate: argument 'input'"),
    (lambda: ops.interpolate(x3, scale_factor=2, mode="cubic"), ValueError, "interpolate: argument 'mode'"),
    (lambda: ops.interpolate(x3, scale_factor=2, mode="bicubic"), ValueError, "a 4-D tensor for mode 'bicubic'"),
    (lambda: ops.interpolate(x4, scale_factor=2, align_corners=True), ValueError,
     "interpolate: argument 'align_corners'"),
    (lambda: ops.interpolate(x4, size=3, scale_factor=2), ValueError, "interpolate: argument 'size / scale_factor'"),
    (lambda: ops.interpolate(x4, size=(3, 3, 3)), ValueError, "interpolate: argument 'size'"),
    (lambda: ops.interpolate(x4, scale_factor=0), ValueError, "interpolate: argument 'scale_factor'"),
    (lambda: ops.interpolate(x4, scale_factor=0.1), ValueError, "interpolate: argument 'scale_factor'"),
    (lambda: ops.interpolate(x4, size=(0, 3)), ValueError, "interpolate: argument 'size'"),
    (lambda: ops.interpolate(x4, size=3, recompute_scale_factor=True), ValueError,
     "interpolate: argument 'recompute_scale_factor'"),
    (lambda: ops.interpolate(x4, size=3, mode="bilinear", antialias=True), ValueError,
     "interpolate: argument 'antialias'"),
])
def test_new_ops_bad_arguments_raise_naming_op_and_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- conv3d ------------------------------------------------------------------------------------------------
CONV3D_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=(2, 1, 3), padding=(1, 2, 0)),
    dict(padding=1, dilation=(2, 1, 2)),
    dict(padding="same"),
    dict(padding="same", dilation=(1, 2, 1)),
    dict(padding="valid", stride=(1, 2, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", CONV3D_CASES, ids=str)
@pytest.mark.parametrize("groups, out_channels, kernel", [(1, 3, (2, 3, 2)), (2, 4, (3, 2, 2)), (4, 4, (2, 2, 3))],
                         ids=["dense", "groups2", "depthwise"])
def test_conv3d_matches_torch(dtype, kwargs, groups, out_channels, kernel):
    rng = np.random.default_rng(40)
    x = rng.standard_normal((2, 4, 6, 5, 6))
    w = rng.standard_normal((out_channels, 4 // groups) + kernel)
    b = rng.standard_normal(out_channels)
    compare_with_torch(lambda x, w, b: ops.conv3d(x, w, b, groups=groups, **kwargs),
                       lambda x, w, b: F.conv3d(x, w, b, groups=groups, **kwargs), [x, w, b], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv3d_unbatched_and_non_contiguous(dtype):
    rng = np.random.default_rng(41)
    x = rng.standard_normal((5, 4, 6, 3)).transpose(3, 0, 1, 2)  # (C, D, H, W), channels last in memory
    w = rng.standard_normal((2, 3, 2, 3, 4)).transpose(4, 3, 0, 1, 2)  # (4, 3, 2, 3, 2)
    compare_with_torch(lambda x, w: ops.conv3d(x, w, padding=(0, 1, 1)),
                       lambda x, w: F.conv3d(x, w, padding=(0, 1, 1)), [x, w], dtype)


@pytest.mark.parametrize("spatial", [1, 2])
def test_conv3d_of_a_unit_depth_and_height_is_conv2d_and_conv1d(spatial):
    # a kernel and input of depth (and height) 1 reduce conv3d to the lower-dimensional conv, exactly
    rng = np.random.default_rng(42)
    x, w = rng.standard_normal((2, 3) + (7,) * spatial), rng.standard_normal((4, 3) + (3,) * spatial)
    units = (None,) * (3 - spatial)
    lower = getattr(ops, f"conv{spatial}d")(x, w, stride=2, padding=1).numpy()
    lifted = ops.conv3d(x[(slice(None),) * 2 + units], w[(slice(None),) * 2 + units], stride=2,
                        padding=(0,) * (3 - spatial) + (1,) * spatial).numpy()
    np.testing.assert_array_equal(lifted.reshape(lower.shape), lower)


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=(1, 2, 1), padding=1), dict(padding="same", dilation=2),
                                    dict(groups=2, padding=(1, 0, 0), dilation=(1, 2, 1))], ids=str)
def test_conv3d_second_order_matches_torch(kwargs):
    rng = np.random.default_rng(43)
    x, w = rng.standard_normal((2, 4, 4, 5, 4)), rng.standard_normal((4, 4 // kwargs.get("groups", 1), 2, 3, 2))
    assert_hvp_matches_torch("conv3d", [x, w, rng.standard_normal(4)], **kwargs)
    assert_hvp_matches_torch("conv3d", [x[0], w, None], **kwargs)


x5 = np.zeros((2, 4, 5, 5, 5))
w5 = np.zeros((6, 4, 2, 2, 2))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ops.conv3d(x4[0], w5), ValueError, r"conv3d: argument 'input'.*\(N, C, D, H, W\)"),
    (lambda: ops.conv3d(x5, w4), ValueError, r"conv3d: argument 'weight'.*kD, kH, kW"),
    (lambda: ops.conv3d(x5, np.zeros((6, 3, 2, 2, 2))), ValueError, "conv3d: argument 'weight'.*4 channels"),
    (lambda: ops.conv3d(x5, w5, groups=3), ValueError, "conv3d: argument 'groups'"),
    (lambda: ops.conv3d(x5, np.zeros((6, 4, 2, 6, 2))), ValueError, "conv3d: argument 'weight'.*padded input"),
    (lambda: ops.conv3d(x5, w5, np.zeros(4)), ValueError, "conv3d: argument 'bias'"),
    (lambda: ops.conv3d(x5, w5, stride=(1, 2)), ValueError, "conv3d: argument 'stride'"),
    (lambda: ops.conv3d(x5, w5, padding="same", stride=2), ValueError, "conv3d: argument 'padding'"),
    (lambda: ops.conv3d(x5.astype(np.int64), w5.astype(np.int64)), TypeError, "conv3d: argument 'input'"),
])
def test_conv3d_bad_arguments_raise_naming_op_and_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- return_indices=True (issue 21) --------------------------------------------------------------------------
@pytest.mark.parametrize("name, shape, attrs", [
    ("max_pool1d", (2, 3, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool2d", (2, 3, 6, 5), {"kernel_size": 2, "stride": 1, "dilation": 2, "ceil_mode": True}),
    ("max_pool3d", (1, 2, 4, 5, 4), {"kernel_size": 2, "padding": 1}),
    ("adaptive_max_pool1d", (2, 3, 7), {"output_size": 3}),
    ("adaptive_max_pool2d", (2, 3, 7, 5), {"output_size": (3, 2)}),
])
def test_return_indices_gives_torchs_values_and_indices(name, shape, attrs):
    x = np.random.default_rng(0).normal(size=shape)
    t = tape.tensor(x, requires_grad=True)
    values, indices = getattr(ops, name)(t, **attrs, return_indices=True)
    th = torch.tensor(x, requires_grad=True)
    expected, expected_indices = getattr(torch.nn.functional, name)(th, **attrs, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), expected.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(getattr(ops, name)(t, **attrs).numpy(), values.numpy())  # False: values alone
    u = np.random.default_rng(1).normal(size=values.shape)
    ops.sum(values * u).backward()
    (grad,) = torch.autograd.grad(expected, [th], torch.from_numpy(u))
    np.testing.assert_allclose(t.grad.numpy(), grad.numpy(), rtol=1e-12, atol=1e-15)  # overlapping windows: sum order


def test_max_pool_indices_feed_max_unpool_as_torchs():
    x = np.random.default_rng(2).normal(size=(2, 3, 8))
    values, indices = ops.max_pool1d(tape.tensor(x), 2, return_indices=True)
    theirs = F.max_unpool1d(*F.max_pool1d(torch.tensor(x), 2, return_indices=True), 2)
    np.testing.assert_array_equal(ops.max_unpool1d(values, indices, 2).numpy(), theirs.numpy())


@pytest.mark.parametrize("name, shape, kwargs", [
    ("max_pool1d", (1, 2, 5), dict(kernel_size=2, stride=2, padding=1)),
    ("max_pool2d", (1, 2, 3, 3), dict(kernel_size=2, stride=2, padding=1)),
    ("max_pool2d", (2, 3, 3), dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)),
    ("max_pool3d", (1, 2, 3, 3, 3), dict(kernel_size=2, stride=2, padding=1)),
], ids=str)
def test_max_pool_windows_of_minus_infinity_pick_the_first_input_cell_as_torch(name, shape, kwargs):
    # a window whose input cells are all -inf ties with its -inf padding: torch's kernels start from the first
    # input cell and only move on a greater value (or NaN), so index and gradient go to that cell, never padding
    x = np.full(shape, -np.inf)
    x.reshape(-1)[::4] = np.arange(x.size)[::4] * 0.5
    t = tape.tensor(x, requires_grad=True)
    values, indices = getattr(ops, name)(t, return_indices=True, **kwargs)
    tx = torch.tensor(x, requires_grad=True)
    expected, expected_indices = getattr(F, name)(tx, return_indices=True, **kwargs)
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
    np.testing.assert_array_equal(values.numpy(), expected.detach().numpy())
    upstream = np.random.default_rng(7).standard_normal(values.shape)
    values.backward(upstream)
    expected.backward(torch.tensor(upstream))
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=0)  # overlaps: sum order
    if name == "max_pool2d":
        v, i = ops.max_pool2d_with_indices(tape.tensor(x), **kwargs)
        np.testing.assert_array_equal(i.numpy(), expected_indices.numpy())


def _with_nonfinite(rng, shape):
    x = rng.standard_normal(shape)
    hit = rng.random(shape) < 0.15
    x[hit] = rng.choice([np.inf, -np.inf, np.nan], size=hit.sum())
    return x


@pytest.mark.parametrize("seed", range(40))
def test_adaptive_avg_pools_keep_an_inf_or_nan_inside_its_windows_as_torch(seed):
    # the pools are separable matmuls: a plain matmul added 0 * inf = NaN into every output of the row (all NaN
    # where torch gives finite averages); only the windows that hold the inf or NaN may see it
    rng = np.random.default_rng(seed)
    nd = 1 + seed % 3
    x = _with_nonfinite(rng, (2, 2) + tuple(int(n) for n in rng.integers(1, 7, size=nd)))
    size = tuple(int(n) for n in rng.integers(1, 6, size=nd))
    name = f"adaptive_avg_pool{nd}d"
    ours = getattr(ops, name)(tape.tensor(x), size).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn.functional, name)(torch.tensor(x), size).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("align_corners", [False, True])
def test_linear_interpolation_sees_an_inf_or_nan_only_through_its_nonzero_weights(seed, align_corners):
    # Known difference, torch's artifact: torch's kernels also multiply the neighbour whose weight is exactly 0
    # (an output on an input's grid point), so 0 * inf makes NaN there; ours is that grid point's value. Wherever
    # torch's result is not NaN, ours is torch's; ours is NaN only where torch's is.
    rng = np.random.default_rng(seed)
    nd = 1 + seed % 3
    x = _with_nonfinite(rng, (2, 2) + tuple(int(n) for n in rng.integers(1, 7, size=nd)))
    size = tuple(int(n) for n in rng.integers(1, 6, size=nd))
    mode = ("linear", "bilinear", "trilinear")[nd - 1]
    ours = ops.interpolate(tape.tensor(x), size=size, mode=mode, align_corners=align_corners).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode, align_corners=align_corners)
    theirs = theirs.numpy()
    defined = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[defined], theirs[defined], rtol=1e-12, atol=1e-12)
    assert not np.isnan(ours[defined]).any()


def _bicubic_by_weights(x, size, align_corners):
    """Bicubic interpolation of ``x`` with inf/NaN by the cells' total weights: torch's response to a unit impulse at
    each finite cell gives that cell's weight at every output (clamped border taps summed); an output is the finite
    cells' weighted sum, +-inf from each non-finite cell of nonzero weight by the sign of weight times value, NaN
    where a NaN has a nonzero weight or +inf meets -inf."""
    height, width = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + size)
    pos, neg, nan = (np.zeros(out.shape, bool) for _ in range(3))
    for i in range(height):
        for j in range(width):
            impulse = torch.zeros((1, 1, height, width), dtype=torch.float64)
            impulse[0, 0, i, j] = 1
            k = torch.nn.functional.interpolate(impulse, size=size, mode="bicubic", align_corners=align_corners)
            k = k.numpy()[0, 0]
            v = x[..., i, j][..., None, None]
            out += np.where(np.isfinite(v), v, 0) * k
            nan |= np.isnan(v) & (k != 0)
            pos |= ((v == np.inf) & (k > 0)) | ((v == -np.inf) & (k < 0))
            neg |= ((v == -np.inf) & (k > 0)) | ((v == np.inf) & (k < 0))
    out[pos], out[neg], out[nan | (pos & neg)] = np.inf, -np.inf, np.nan
    return out


@pytest.mark.parametrize("seed", range(30))
def test_bicubic_interpolation_sees_an_inf_or_nan_through_its_total_weight(seed):
    # Known difference, torch's artifact: torch multiplies a weight exactly 0 (outputs on grid points) and weighs a
    # border cell once per clamped tap, so inf * w1 + inf * w2 = NaN where the cell's total weight is nonzero;
    # ours follows the total weights (the reference above). Wherever torch's result is not NaN, ours is torch's.
    rng = np.random.default_rng(seed)
    x = _with_nonfinite(rng, (2, 2) + tuple(int(n) for n in rng.integers(1, 6, size=2)))
    size = tuple(int(n) for n in rng.integers(1, 9, size=2))
    align_corners = bool(seed % 2)
    ours = ops.interpolate(tape.tensor(x), size=size, mode="bicubic", align_corners=align_corners).numpy()
    np.testing.assert_allclose(ours, _bicubic_by_weights(x, size, align_corners), rtol=1e-10, atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode="bicubic",
                                                 align_corners=align_corners).numpy()
    defined = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[defined], theirs[defined], rtol=1e-10, atol=1e-10)
