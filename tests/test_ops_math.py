"""Integer dtypes (uint8, int8, int16 beside int32/int64/bool), float16 storage, the bitwise ops and Tensor operators,
and the elementwise/binary ops of issue #21 where the generated tests cannot look: dtypes of integer results
(the generated parity compares integer values, not dtypes), torch's conventions at ties, NaN and extremes."""

import numpy as np
import pytest
from oracle import ours, theirs

import ops
import tape

INTS = [np.uint8, np.int8, np.int16, np.int32, np.int64]
TORCH_NAMES = {"uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
               "float16": "float16", "float32": "float32", "float64": "float64"}


def _torch_dtype(torch, dtype):
    return getattr(torch, TORCH_NAMES[np.dtype(dtype).name])


def _same_as_torch(got, expected):
    """Equal values and the same dtype (torch's dtype named as numpy's)."""
    expected = expected.numpy()
    assert got.dtype == expected.dtype, f"dtype {got.dtype}, torch {expected.dtype}"
    np.testing.assert_array_equal(got.numpy(), expected)


# -- Python ints take an integer tensor's dtype, wrapped (torch's weak scalars) ------------------------------------
@pytest.mark.parametrize("dtype", INTS)
def test_a_python_int_takes_the_integer_tensors_dtype_and_wraps_as_torch(torch, dtype):
    """Before: the int became an int64 tensor, so int8 [120] + 10 gave int64 130 where torch gives int8 -126."""
    a = np.array([120, 7, 100], dtype=dtype)
    x, t = tape.tensor(a), torch.tensor(a)
    for f in (lambda p: p + 10, lambda p: 10 - p, lambda p: p * 3, lambda p: p + 300, lambda p: p - 2**40,
              lambda p: p & 6, lambda p: p | 1, lambda p: p ^ -1, lambda p: p << 1, lambda p: p >> 1):
        _same_as_torch(f(x), f(t))
    _same_as_torch(ops.where(x > 50, x, 0), torch.where(t > 50, t, 0))


@pytest.mark.parametrize("dtype", [*INTS, np.bool_])
@pytest.mark.parametrize("name", ["sum", "prod", "cumsum", "cumprod"])
def test_integer_sums_and_products_are_int64_as_torch(torch, dtype, name):
    """Before: numpy's uint64 for uint8 input (torch: int64 for every integer and bool dtype)."""
    a = np.array([[200, 3, 1], [7, 250, 2]]).astype(dtype)
    args = (1,) if name.startswith("cum") else ()
    _same_as_torch(getattr(ops, name)(tape.tensor(a), *args), getattr(torch, name)(torch.tensor(a), *args))


# -- float16: a storage dtype, converted explicitly; ops compute in float32/float64 -----------------------------------
def test_float16_tensors_store_torchs_rounding(torch):
    values = np.array([0.1, 1 / 3, 65504.0, 70000.0, 6e-8, -2.5e-5, np.inf, np.nan])
    stored = tape.tensor(values, dtype=np.float16)
    assert stored.dtype == np.float16
    np.testing.assert_array_equal(stored.numpy(), torch.tensor(values, dtype=torch.float16).numpy())
    np.testing.assert_array_equal(stored.float().numpy(), torch.tensor(values).half().float().numpy())


def test_cast_to_and_from_float16_is_differentiable_as_torch(torch):
    x = np.array([0.1, -2.7, 1000.3])
    ours_value, ours_grad = ours(lambda t: t.half().float() * 3.0, x)
    torch_value, torch_grad = theirs(lambda t: t.half().float() * 3.0, x)
    np.testing.assert_array_equal(ours_value, torch_value)
    np.testing.assert_array_equal(ours_grad, torch_grad)


@pytest.mark.parametrize("call,name", [
    (lambda h: ops.exp(h), "exp"), (lambda h: h + h, "add"), (lambda h: h * 2.0, "mul"), (lambda h: h.sum(), "sum"),
    (lambda h: ops.lgamma(h), "lgamma"), (lambda h: h[0], "getitem"), (lambda h: h + tape.tensor([1, 2]), "add"),
])
def test_every_op_but_cast_refuses_float16_naming_itself(call, name):
    h = tape.tensor(np.array([1.5, 2.0]), dtype=np.float16)
    with pytest.raises(TypeError, match=rf"^{name}: argument '\w+' has dtype float16, a storage dtype"):
        call(h)


def test_float16_meeting_float32_is_refused_naming_the_op():
    h, f = tape.tensor(np.array([1.5]), dtype=np.float16), tape.tensor(np.array([1.5], np.float32))
    with pytest.raises(TypeError, match=r"^add: "):
        h + f


# -- casts between every dtype ------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", [np.float64, np.float32, np.float16, *INTS, np.bool_])
@pytest.mark.parametrize("target", [np.float64, np.float32, np.float16, *INTS, np.bool_])
def test_cast_between_every_dtype_as_torch(torch, source, target):
    # in range of every dtype: out-of-range float -> integer casts are undefined in C (and differ in torch)
    a = np.array([0, 1, 2, 100, 3, 0]).astype(source)
    _same_as_torch(ops.cast(tape.tensor(a), target), torch.tensor(a).to(_torch_dtype(torch, target)))


def test_integer_casts_wrap_as_torch(torch):
    a = np.array([300, -1, 128, -129, 65535, 2**40 + 7])
    for target in (np.uint8, np.int8, np.int16, np.int32):
        _same_as_torch(ops.cast(tape.tensor(a), target), torch.tensor(a).to(_torch_dtype(torch, target)))


@pytest.mark.parametrize("method,dtype", [("half", np.float16), ("byte", np.uint8), ("char", np.int8),
                                          ("short", np.int16), ("int", np.int32), ("long", np.int64)])
def test_tensor_conversion_methods(torch, method, dtype):
    a = np.array([1.7, 2.2, 100.0])  # a negative float to uint8 is undefined in C
    got = getattr(tape.tensor(a), method)()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), getattr(torch.tensor(a), method)().numpy())
