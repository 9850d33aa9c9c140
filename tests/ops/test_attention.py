"""scaled_dot_product_attention against torch's MATH backend and finite differences, over every option.

The oracle is torch 2.13's MATH backend (its CPU flash backward is wrong on finite-fill masked rows),
with our extras -- key-padding lengths and the bottom-right causal alignment -- given to torch as an
explicit mask. Forward values and the gradients of q, k, v and a float mask are compared in float32
(rtol 1e-4) and float64 (rtol 1e-9); float64 finite differences (tape.gradcheck) cover the same
options plus dropout with a fixed seed.
"""

import numpy as np
import pytest
from oracle import require_torch

import ops
import tape

SDPA = ops.scaled_dot_product_attention
TOLERANCE = {np.float32: (1e-4, 1e-5), np.float64: (1e-9, 1e-12)}  # rtol, atol (atol scaled by the values)


def make_mask(kind, shape, rng, dtype):
    if kind == "bool":
        mask = rng.random(shape) < 0.7
        mask.reshape(-1, shape[-1])[0] = True  # keep at least one visible row; empty rows have their own cases
        return mask
    values = rng.standard_normal(shape)
    if kind == "float-inf":
        values[rng.random(shape) < 0.3] = -np.inf
    return values.astype(dtype)


def torch_oracle(q, k, v, mask, g, *, is_causal=False, causal_alignment="top_left", key_padding_lengths=None,
                 scale=None, enable_gqa=False):
    """Output and gradients (q, k, v, mask or None) from torch's MATH backend, through the op's own
    registered torch reference (which turns lengths and bottom-right alignment into an explicit mask)."""
    torch = require_torch()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tmask = None if mask is None else torch.tensor(mask, requires_grad=mask.dtype != np.bool_)
    out = tape.get_op("scaled_dot_product_attention").torch_ref(
        torch, tq, tk, tv, tmask, is_causal=is_causal, causal_alignment=causal_alignment,
        key_padding_lengths=None if key_padding_lengths is None else np.asarray(key_padding_lengths),
        scale=scale, enable_gqa=enable_gqa)
    out.backward(torch.tensor(g))
    grads = [t.grad.numpy() for t in (tq, tk, tv)]
    grads.append(None if tmask is None or tmask.grad is None else tmask.grad.numpy())
    return out.detach().numpy(), grads


def run_ours(q, k, v, mask, g, mask_grad=True, **options):
    tensors = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
    tmask = None if mask is None else tape.tensor(mask, requires_grad=mask_grad and mask.dtype != np.bool_)
    out = SDPA(*tensors, tmask, **options)
    out.backward(g)
    grads = [t.grad.numpy() for t in tensors] + [None if tmask is None or tmask.grad is None else tmask.grad.numpy()]
    return out.numpy(), grads


def assert_close(ours, theirs, dtype, what):
    rtol, atol = TOLERANCE[dtype]
    assert ours.dtype == dtype, f"{what}: dtype {ours.dtype}"
    assert not np.isnan(ours).any(), f"{what}: NaN"
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol * max(1.0, np.abs(theirs).max(initial=0)),
                               err_msg=what)


# name: (q shape, k shape, v shape, mask (kind, shape) or None, options)
CASES = {
    "plain, L < S, E != Ev": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 3), None, {}),
    "L > S": ((2, 2, 7, 4), (2, 2, 5, 4), (2, 2, 5, 4), None, {}),
    "causal top-left, L < S": ((1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 2), None, {"is_causal": True}),
    "causal top-left, L > S": ((1, 2, 7, 3), (1, 2, 4, 3), (1, 2, 4, 2), None, {"is_causal": True}),
    "causal bottom-right, L < S": ((1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 2), None,
                                   {"is_causal": True, "causal_alignment": "bottom_right"}),
    "causal bottom-right, L > S (empty rows)": ((1, 2, 7, 3), (1, 2, 4, 3), (1, 2, 4, 2), None,
                                                {"is_causal": True, "causal_alignment": "bottom_right"}),
    "bool mask (L,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("bool", (4, 5)), {}),
    "bool mask (1,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("bool", (1, 5)), {}),
    "bool mask (B,1,1,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("bool", (2, 1, 1, 5)), {}),
    "float mask (L,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float", (4, 5)), {}),
    "float mask (1,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float", (1, 5)), {}),
    "float mask (L,1)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float", (4, 1)), {}),
    "float mask (H,L,S) with -inf": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float-inf", (2, 4, 5)), {}),
    "float mask (B,1,1,S)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float", (2, 1, 1, 5)), {}),
    "float mask (B,1,L,1)": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), ("float", (2, 1, 4, 1)), {}),
    "float mask + causal": ((1, 2, 5, 3), (1, 2, 5, 3), (1, 2, 5, 2), ("float", (5, 5)), {"is_causal": True}),
    "bool mask + causal bottom-right": ((1, 2, 3, 3), (1, 2, 5, 3), (1, 2, 5, 2), ("bool", (3, 5)),
                                        {"is_causal": True, "causal_alignment": "bottom_right"}),
    "lengths 0 and full": ((2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 2), None, {"key_padding_lengths": [0, 5]}),
    "lengths + float mask + causal": ((3, 1, 4, 3), (3, 1, 6, 3), (3, 1, 6, 2), ("float", (4, 6)),
                                      {"key_padding_lengths": [2, 6, 4], "is_causal": True}),
    "lengths (B1,B2) on 5-D": ((2, 2, 1, 3, 3), (2, 2, 1, 4, 3), (2, 2, 1, 4, 2), None,
                               {"key_padding_lengths": [[1, 4], [3, 2]]}),
    "GQA 6 on 2": ((1, 6, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3), None, {"enable_gqa": True}),
    "GQA + causal + float mask (H,L,S)": ((1, 4, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3), ("float", (4, 4, 4)),
                                          {"enable_gqa": True, "is_causal": True}),
    "GQA, K and V with different heads": ((1, 6, 3, 2), (1, 2, 4, 2), (1, 3, 4, 2), None, {"enable_gqa": True}),
    "broadcast kv head": ((2, 3, 3, 2), (2, 1, 4, 2), (2, 1, 4, 2), None, {}),
    "broadcast query head": ((2, 1, 3, 2), (2, 2, 4, 2), (2, 2, 4, 3), None, {"is_causal": True}),
    "K broadcast over heads, V not": ((1, 2, 3, 2), (1, 1, 4, 2), (1, 2, 4, 3), ("float", (2, 3, 4)), {}),
    "2-D": ((4, 3), (5, 3), (5, 2), None, {}),
    "3-D": ((2, 4, 3), (2, 5, 3), (2, 5, 2), ("bool", (4, 5)), {}),
    "5-D, broadcast batch": ((2, 1, 2, 3, 3), (1, 3, 2, 4, 3), (1, 3, 2, 4, 2), None, {}),
    "scale 0": ((1, 2, 3, 3), (1, 2, 4, 3), (1, 2, 4, 2), None, {"scale": 0.0}),
    "scale -0.5": ((1, 2, 3, 3), (1, 2, 4, 3), (1, 2, 4, 2), ("float", (3, 4)), {"scale": -0.5}),
    "scale 2": ((1, 2, 3, 3), (1, 2, 4, 3), (1, 2, 4, 2), None, {"scale": 2.0, "is_causal": True}),
}


def case_arrays(name, dtype, seed=0):
    q_shape, k_shape, v_shape, mask_spec, options = CASES[name]
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in (q_shape, k_shape, v_shape))
    mask = None if mask_spec is None else make_mask(*mask_spec, rng, dtype)
    return q, k, v, mask, dict(options)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch_math(name, dtype):
    q, k, v, mask, options = case_arrays(name, dtype)
    out_shape = SDPA(tape.tensor(q), tape.tensor(k), tape.tensor(v), None if mask is None else tape.tensor(mask),
                     **options).shape
    g = np.random.default_rng(1).standard_normal(out_shape).astype(dtype)
    out, grads = run_ours(q, k, v, mask, g, **options)
    expected, expected_grads = torch_oracle(q, k, v, mask, g, **options)
    assert_close(out, expected, dtype, "output")
    for what, ours, theirs in zip(("dq", "dk", "dv", "dmask"), grads, expected_grads):
        if theirs is None:
            assert ours is None, what
        else:
            assert_close(ours, theirs, dtype, what)


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name):
    q, k, v, mask, options = case_arrays(name, np.float64, seed=2)
    inputs = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
    if mask is not None:
        inputs.append(tape.tensor(mask, requires_grad=mask.dtype != np.bool_))
    tape.gradcheck(lambda *xs: SDPA(*xs, **options), inputs)


@pytest.mark.parametrize("name", ["plain, L < S, E != Ev", "float mask + causal", "lengths + float mask + causal",
                                  "GQA + causal + float mask (H,L,S)", "5-D, broadcast batch"])
def test_gradcheck_with_dropout(name):
    q, k, v, mask, options = case_arrays(name, np.float64, seed=3)
    inputs = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
    if mask is not None:
        inputs.append(tape.tensor(mask, requires_grad=mask.dtype != np.bool_))
    tape.gradcheck(lambda *xs: SDPA(*xs, dropout_p=0.4, rng=np.random.default_rng(5), **options), inputs)


def test_float_mask_not_requiring_grad_gets_no_gradient_and_the_rest_is_right():
    q, k, v, mask, options = case_arrays("float mask (H,L,S) with -inf", np.float64)
    g = np.random.default_rng(1).standard_normal((2, 2, 4, 3))
    out, grads = run_ours(q, k, v, mask, g, mask_grad=False)
    expected, expected_grads = torch_oracle(q, k, v, mask, g)
    assert grads[3] is None
    for ours, theirs in zip(grads[:3], expected_grads[:3]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_only_the_inputs_that_need_a_gradient_get_one():
    rng = np.random.default_rng(0)
    q = tape.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    k, v = (tape.tensor(rng.standard_normal((1, 2, 5, 4))) for _ in range(2))
    SDPA(q, k, v).backward(np.ones((1, 2, 3, 4)))
    assert q.grad is not None and k.grad is None and v.grad is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_finite_fill_rows_are_uniform_attention_like_torch_math(dtype):
    """A row filled with -1e9 behaves as torch's MATH backend: in float32 the fill swallows the scores, so the
    softmax is uniform (output = mean of V) -- where exp(S - lse) with lse rounded to -1e9 would give P = 1
    instead of 1/S; in float64 the scores survive the fill."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 2)))
    mask = rng.standard_normal((4, 6)).astype(dtype)
    mask[1] = -1e9
    mask[3, :4] = -1e9
    g = rng.standard_normal((1, 2, 4, 2)).astype(dtype)
    out, grads = run_ours(q, k, v, mask, g)
    expected, expected_grads = torch_oracle(q, k, v, mask, g)
    if dtype == np.float32:
        np.testing.assert_allclose(out[..., 1, :], v.mean(axis=-2), rtol=1e-5)
    assert_close(out, expected, dtype, "output")
    for what, ours, theirs in zip(("dq", "dk", "dv", "dmask"), grads, expected_grads):
        assert_close(ours, theirs, dtype, what)


def test_scale_zero_is_uniform_attention_and_none_is_one_over_sqrt_e():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3)))
    out = SDPA(tape.tensor(q), tape.tensor(k), tape.tensor(v), scale=0.0).numpy()
    np.testing.assert_allclose(out, np.broadcast_to(v.mean(axis=-2, keepdims=True), out.shape), rtol=1e-12)
    default = SDPA(tape.tensor(q), tape.tensor(k), tape.tensor(v)).numpy()
    explicit = SDPA(tape.tensor(q), tape.tensor(k), tape.tensor(v), scale=0.5).numpy()  # E = 4: 1/sqrt(4)
    np.testing.assert_array_equal(default, explicit)
