"""scaled_dot_product_attention's promises beyond parity: empty rows, exact zeros at masked positions,
dropout's mask reuse and keep rate, tiling independence, the lean saved state, argument errors, and the
kernels' runtime (BLAS single-threaded while tiles run on threads, its thread count restored after)."""

import tracemalloc

import numpy as np
import pytest
import threadpoolctl

import ops
import tape
from ops._kernels import flash, runtime

SDPA = ops.scaled_dot_product_attention


def leaves(*arrays):
    return [tape.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def forward_backward(q, k, v, mask=None, seed=1, **options):
    tensors = leaves(q, k, v) + ([] if mask is None else leaves(mask))
    out = SDPA(*tensors, **options)
    g = np.random.default_rng(seed).standard_normal(out.shape).astype(q.dtype)
    out.backward(g)
    return out.numpy(), [t.grad.numpy() if t.grad is not None else None for t in tensors], g


def tiled(**changes):
    """The kernels' tuning with these changes and the tiled path forced (small problems otherwise run whole)."""
    return flash.tuning(whole_problem_scores=0, **changes)


# -- fully masked rows and masked positions ----------------------------------------------------------------
EMPTY_ROW_CASES = {
    "bool mask row all False": lambda rng: dict(mask=np.array([[True] * 5, [False] * 5, [True, False] * 2 + [True]])),
    "float mask row all -inf": lambda rng: dict(mask=np.where(np.arange(3)[:, None] == 1, -np.inf,
                                                               rng.standard_normal((3, 5)))),
    "key padding length 0": lambda rng: dict(key_padding_lengths=[0, 5]),
    "bottom-right causal, L > S": lambda rng: dict(is_causal=True, causal_alignment="bottom_right"),
}


@pytest.mark.parametrize("name", list(EMPTY_ROW_CASES))
def test_fully_masked_rows_give_zero_output_and_gradients_and_no_nan(name):
    rng = np.random.default_rng(0)
    options = EMPTY_ROW_CASES[name](rng)
    L = 7 if name.startswith("bottom") else 3
    q, k, v = rng.standard_normal((2, 2, L, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 3))
    mask = options.pop("mask", None)
    out, grads, g = forward_backward(q, k, v, mask, **options)
    for a in [out] + [x for x in grads if x is not None]:
        assert np.isfinite(a).all()
    if name == "key padding length 0":
        empty = (0, slice(None), slice(None))  # batch 0: every row
    elif name.startswith("bottom"):
        empty = (slice(None), slice(None), slice(0, 2))  # rows i < L - S
    else:
        empty = (slice(None), slice(None), 1)
    assert (out[empty] == 0).all()
    assert (grads[0][empty] == 0).all()
    if mask is not None and grads[3] is not None:
        assert (grads[3][1] == 0).all()
    # no contribution to dK/dV: the same gradients as with those rows' output gradient set to zero
    tensors = leaves(q, k, v) + ([] if mask is None else leaves(mask))
    g_without = g.copy()
    g_without[empty] = 0
    SDPA(*tensors, **options).backward(g_without)
    np.testing.assert_array_equal(tensors[1].grad.numpy(), grads[1])
    np.testing.assert_array_equal(tensors[2].grad.numpy(), grads[2])


def test_masked_positions_get_exactly_zero_gradient():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 2, 6, 3)), rng.standard_normal((2, 2, 6, 2))
    mask = rng.standard_normal((2, 2, 4, 6))
    mask[rng.random(mask.shape) < 0.3] = -np.inf
    lengths = np.array([4, 6])
    out, (dq, dk, dv, dmask), _ = forward_backward(q, k, v, mask, is_causal=True, causal_alignment="bottom_right",
                                                   key_padding_lengths=lengths)
    hidden = np.isneginf(mask) | (np.arange(6)[None, :] > np.arange(4)[:, None] + 2)  # causal, S - L = 2
    hidden = hidden | (np.arange(6) >= lengths[:, None, None, None])
    assert (dmask[hidden] == 0).all()
    assert (dmask[~hidden] != 0).mean() > 0.8  # (a row with one visible key has dS = 0 there too)
    assert (dk[0, :, 4:] == 0).all() and (dv[0, :, 4:] == 0).all()  # keys past batch 0's length


def test_key_padding_lengths_equal_cutting_k_and_v():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 2, 4, 3)), rng.standard_normal((3, 2, 6, 3)), rng.standard_normal((3, 2, 6, 2))
    lengths = [6, 1, 4]
    out = SDPA(*leaves(q, k, v), key_padding_lengths=lengths).numpy()
    for b, n in enumerate(lengths):
        cut = SDPA(*leaves(q[b], k[b, :, :n], v[b, :, :n])).numpy()
        np.testing.assert_allclose(out[b], cut, rtol=1e-12)


# -- dropout -----------------------------------------------------------------------------------------------
def naive_dropout_attention(q, k, v, keep, p, scale):
    """Reference with the keep mask given explicitly, and its gradients by hand (numpy, float64)."""
    s = scale * q @ np.swapaxes(k, -1, -2)
    weights = np.exp(s - s.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    dropped = weights * keep / (1 - p)
    return dropped @ v, weights, dropped


def test_dropout_backward_uses_the_forwards_mask():
    rng = np.random.default_rng(3)
    B, H, L, S, E, p = 2, 2, 5, 7, 3, 0.4
    q, k, v = rng.standard_normal((B, H, L, E)), rng.standard_normal((B, H, S, E)), rng.standard_normal((B, H, S, E))
    out, (dq, dk, dv), g = forward_backward(q, k, v, dropout_p=p, rng=np.random.default_rng(9))
    seed = int(np.random.default_rng(9).integers(0, 2**63))  # what the wrapper draws
    keep = np.stack([flash.dropout_keep_mask(seed, h, (0, L), (0, S), L, S, p) for h in range(B * H)])
    keep = keep.reshape(B, H, L, S)
    assert 0 < keep.mean() < 1
    expected, weights, dropped = naive_dropout_attention(q, k, v, keep, p, 1 / np.sqrt(E))
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_allclose(dv, np.swapaxes(dropped, -1, -2) @ g, rtol=1e-10)
    d_weights = (g @ np.swapaxes(v, -1, -2)) * keep / (1 - p)
    d_scores = weights * (d_weights - (weights * d_weights).sum(-1, keepdims=True)) / np.sqrt(E)
    np.testing.assert_allclose(dq, d_scores @ k, rtol=1e-10)
    np.testing.assert_allclose(dk, np.swapaxes(d_scores, -1, -2) @ q, rtol=1e-10)


def test_dropout_is_reproducible_from_the_rng_and_differs_between_seeds():
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((1, 2, 6, 3)) for _ in range(3)]
    a = SDPA(*leaves(*arrays), dropout_p=0.5, rng=np.random.default_rng(1)).numpy()
    b = SDPA(*leaves(*arrays), dropout_p=0.5, rng=np.random.default_rng(1)).numpy()
    c = SDPA(*leaves(*arrays), dropout_p=0.5, rng=np.random.default_rng(2)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keeps_the_expected_fraction(p):
    """scale=0 and V = identity: out[i, j] = keep[i, j] / ((1 - p) S), so the output reads the mask back."""
    H, L, S = 2, 64, 256
    q, k = np.zeros((H, L, 1)), np.zeros((H, S, 1))
    v = np.broadcast_to(np.eye(S), (H, S, S)).copy()
    out = SDPA(*leaves(q, k, v), dropout_p=p, scale=0.0, rng=np.random.default_rng(5)).numpy()
    keep = out * (1 - p) * S
    np.testing.assert_allclose(keep[keep > 0.5], 1, rtol=1e-9)
    n = keep.size
    assert abs(keep.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)


# -- tiling ------------------------------------------------------------------------------------------------
TILING_CASES = {
    "plain": dict(),
    "causal bottom-right": dict(is_causal=True, causal_alignment="bottom_right"),
    "float mask + lengths + causal": dict(mask=True, is_causal=True, key_padding_lengths=[13, 5]),
    "dropout + GQA": dict(dropout_p=0.3, enable_gqa=True),
}


@pytest.mark.parametrize("name", list(TILING_CASES))
@pytest.mark.parametrize("rows,keys,workers", [(3, 4, 1), (7, 5, 2), (5, None, 2)])
def test_tile_sizes_that_do_not_divide_l_or_s_give_the_one_tile_result(name, rows, keys, workers):
    options = dict(TILING_CASES[name])
    rng = np.random.default_rng(6)
    L, S = 17, 13
    heads_kv = 1 if options.get("enable_gqa") else 2
    q, k, v = rng.standard_normal((2, 2, L, 4)), rng.standard_normal((2, heads_kv, S, 4)), \
        rng.standard_normal((2, heads_kv, S, 3))
    mask = rng.standard_normal((2, L, S)) if options.pop("mask", False) else None
    dropout = options.get("dropout_p", 0.0)

    def run():
        rng_options = {"rng": np.random.default_rng(8)} if dropout else {}
        return forward_backward(q, k, v, mask, **options, **rng_options)[:2]

    with tiled(block_rows=L, block_keys=S, workers=1):
        one_out, one_grads = run()
    with tiled(block_rows=rows, block_keys=keys, workers=workers, tile_elements=rows * S):  # one head per tile
        out, grads = run()
    np.testing.assert_allclose(out, one_out, rtol=1e-12, atol=1e-15)
    for ours, expected in zip(grads, one_grads):
        np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-14)


# -- what the forward keeps --------------------------------------------------------------------------------
def test_forward_saves_only_the_row_statistics_besides_inputs_and_output():
    rng = np.random.default_rng(7)
    q, k, v = (tape.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 3, 8, 4), (2, 3, 9, 4),
                                                                                 (2, 3, 9, 5)))
    out = SDPA(q, k, v, is_causal=True)
    arrays, ans, aux = out._node.residuals
    # the saved arrays are the tensors' own memory, not copies
    assert np.shares_memory(ans, out.numpy())
    assert all(np.shares_memory(a, b.numpy()) for a, b in zip(arrays[:3], (q, k, v)))
    assert sorted(aux) == ["options", "row_log_sum", "row_max"]  # options: resolved once (no seed drawn: none saved)
    assert aux["row_max"].shape == aux["row_log_sum"].shape == (2, 3, 8)
    assert not any(isinstance(v, np.ndarray) and v.size > 8 * 9 // 2 for v in aux["options"].values())


def test_peak_memory_stays_far_below_the_full_weights():
    """At L = S = 1024 with 2 heads the weights alone take 8 MiB (float32); a naive backward holds several
    such arrays. Tiled, the extra peak stays under 4 MiB, key-padding lengths included."""
    rng = np.random.default_rng(8)
    q, k, v, g = (rng.standard_normal((1, 2, 1024, 16)).astype(np.float32) for _ in range(4))
    tensors = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
    with tiled(tile_elements=1 << 15):
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        SDPA(*tensors, is_causal=True, key_padding_lengths=[1000]).backward(g)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"extra peak {peak / 2**20:.1f} MiB"


# -- bad input ---------------------------------------------------------------------------------------------
def arrays(*shapes, dtype=np.float64):
    rng = np.random.default_rng(9)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


BAD_INPUT = [
    ("head dim mismatch", lambda: SDPA(*arrays((1, 2, 3, 4), (1, 2, 5, 3), (1, 2, 5, 4))), ValueError, "key"),
    ("K/V length mismatch", lambda: SDPA(*arrays((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 6, 4))), ValueError, "value"),
    ("GQA heads do not divide", lambda: SDPA(*arrays((1, 3, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), enable_gqa=True),
     ValueError, "key"),
    ("head mismatch without GQA", lambda: SDPA(*arrays((1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4))), ValueError,
     "enable_gqa"),
    ("dropout 1", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), dropout_p=1.0), ValueError, "dropout_p"),
    ("dropout negative", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), dropout_p=-0.1), ValueError,
     "dropout_p"),
    ("mask of a wrong shape", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), np.ones((3, 4), bool)),
     ValueError, "attn_mask"),
    ("mask with too many dims", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), np.ones((4, 2, 3, 5), bool)),
     ValueError, "attn_mask"),
    ("integer mask", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), np.ones((3, 5), np.int64)), TypeError,
     "attn_mask"),
    ("float64 mask on float32", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4), dtype=np.float32),
                                            np.zeros((3, 5))), TypeError, "attn_mask"),
    ("lengths of a wrong shape", lambda: SDPA(*arrays((2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4)),
                                              key_padding_lengths=[1, 2, 3]), ValueError, "key_padding_lengths"),
    ("lengths too long", lambda: SDPA(*arrays((2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4)),
                                      key_padding_lengths=[1, 6]), ValueError, "key_padding_lengths"),
    ("negative lengths", lambda: SDPA(*arrays((2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4)),
                                      key_padding_lengths=[-1, 2]), ValueError, "key_padding_lengths"),
    ("float lengths", lambda: SDPA(*arrays((2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4)),
                                   key_padding_lengths=[1.5, 2.0]), TypeError, "key_padding_lengths"),
    ("rank 1", lambda: SDPA(*arrays((4,), (5, 4), (5, 4))), ValueError, "query"),
    ("rank 6", lambda: SDPA(*arrays((1, 1, 1, 1, 3, 4), (5, 4), (5, 4))), ValueError, "query"),
    ("dtype mismatch", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4)), arrays((2, 5, 4), dtype=np.float32)[0]),
     TypeError, "value"),
    ("integer query", lambda: SDPA(np.ones((2, 3, 4), np.int64), *arrays((2, 5, 4), (2, 5, 4))), TypeError, "query"),
    ("unknown alignment", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), is_causal=True,
                                       causal_alignment="diagonal"), ValueError, "causal_alignment"),
    ("scale of a wrong type", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), scale="0.5"), TypeError,
     "scale"),
    ("rng of a wrong type", lambda: SDPA(*arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)), dropout_p=0.5, rng=3), TypeError,
     "rng"),
]


@pytest.mark.parametrize("name,call,error,argument", BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_raises_a_clear_error_naming_the_argument(name, call, error, argument):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "scaled_dot_product_attention" in message and argument in message, message


# -- the runtime: worker threads and the BLAS thread guard ---------------------------------------------------
def blas_threads():
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """numpy's BLAS at two threads during the test (so that making it single-threaded shows), restored after."""
    if runtime.single_threaded_blas() is None:
        pytest.skip("no BLAS whose thread count threadpoolctl can switch")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        yield runtime.single_threaded_blas()


def test_blas_is_single_threaded_inside_the_guard_until_the_last_user_leaves(two_blas_threads):
    """Nested or overlapping uses (two threads running kernels at once) count: the last one out restores."""
    guard = two_blas_threads
    before = blas_threads()
    assert 2 in before
    with guard:
        assert set(blas_threads()) == {1}
        with guard:
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


def test_blas_thread_count_is_restored_after_a_threaded_call(two_blas_threads):
    before = blas_threads()
    seen = []
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((1, 2, 16, 4)) for _ in range(3))
    run = runtime.run

    def spy(items, work, workers):
        run(items, lambda worker, item: (seen.append(tuple(blas_threads())), work(worker, item)), workers)

    with tiled(block_rows=4, workers=2), pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "run", spy)
        out, grads, _ = forward_backward(q, k, v, is_causal=True)
    assert seen and all(set(counts) == {1} for counts in seen)
    assert blas_threads() == before
    with tiled(block_rows=4, workers=1):
        serial_out, serial_grads, _ = forward_backward(q, k, v, is_causal=True)
    np.testing.assert_allclose(out, serial_out, rtol=1e-12)
    for ours, expected in zip(grads, serial_grads):
        np.testing.assert_allclose(ours, expected, rtol=1e-12)


def test_dropout_drawn_from_a_generator_is_recorded_and_replayed_with_the_same_mask():
    rng = np.random.default_rng(5)
    q, k, v = (tape.tensor(rng.standard_normal((1, 2, 4, 3)), requires_grad=True) for _ in range(3))
    with tape.ExecutionTape() as recorded:
        out = SDPA(q, k, v, dropout_p=0.5, rng=np.random.default_rng(11))
    seed = out.grad_fn.attrs["dropout_seed"]
    assert isinstance(seed, int)  # the seed the forward drew, recorded as the attribute
    replayed = recorded.replay()[out.id]
    np.testing.assert_array_equal(replayed, out.numpy())
    (g,) = tape.gradients((out * out).sum(), [q], create_graph=True)  # the composite regenerates the same mask
    np.testing.assert_allclose(g.numpy(), tape.gradients((out * out).sum(), [q])[0].numpy(), rtol=1e-10)


def test_a_later_call_never_writes_into_results_still_held():
    """The tiled path takes its output and gradients from ``buffers`` (reused once nothing refers to them): the
    results of a first call, still held, keep their values through a second call on other inputs."""
    rng = np.random.default_rng(12)
    shape = (1, 2, 300, 8)  # 4 tiles a pass; output and gradients of 19 KiB.. above buffers.SMALLEST when float64
    first, second = ([rng.standard_normal(shape) for _ in range(4)] for _ in range(2))
    with tiled(block_rows=150, block_keys=150):
        results = forward_backward(*first[:3], None, is_causal=True)
        copies = [results[0].copy()] + [g.copy() for g in results[1]]
        forward_backward(*second[:3], None, is_causal=True)
    for held, copy in zip([results[0]] + list(results[1]), copies):
        np.testing.assert_array_equal(held, copy)


@pytest.mark.parametrize("scale", [0.1, 3.0, 30.0, 300.0])
@pytest.mark.parametrize("path", [dict(whole_problem_scores=1 << 40), dict(whole_problem_scores=0)],
                         ids=["whole", "tiled"])
def test_scores_small_or_large_give_the_float64_softmax_in_float32(scale, path):
    """The forward skips its row max when the scores are bounded (``flash._bounded``): from small scores to ones
    whose exp overflows float32 (scale 300: scores up to ~1e4), the output is float64's softmax(S) V, and
    the gradients are finite."""
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal((2, 2, 40, 8)) for _ in range(3))
    scores = scale * q @ np.swapaxes(k, -1, -2)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = (weights / weights.sum(axis=-1, keepdims=True)) @ v
    with flash.tuning(**path):
        out, grads, _ = forward_backward(*(a.astype(np.float32) for a in (q, k, v)), scale=scale)
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-4 * np.abs(expected).max())
    assert all(np.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_huge_values_with_scores_at_the_bound_give_a_finite_output(dtype):
    """Scores at the forward's bound for skipping the row max (``flash._bounded``: all equal, q = k) with values
    of 1e30 (float32) / 1e290 (float64): exp of the unshifted scores times V would overflow, so the bound counts
    V too; the output is V's mean."""
    E, n = 8, 40
    big = 1e30 if dtype == np.float32 else 1e290
    exponent = np.finfo(dtype).maxexp / 4 * 0.95  # just inside the bound on the scores alone
    scale = exponent / (E * np.log2(np.e))
    q = np.ones((1, 1, n, E), dtype)
    v = np.full((1, 1, n, 3), big, dtype) * np.linspace(0.5, 1.5, n, dtype=dtype)[:, None]
    with tiled():
        out, _, _ = forward_backward(q, q.copy(), v, scale=scale)
    np.testing.assert_allclose(out, np.broadcast_to(v.mean(axis=-2, keepdims=True), out.shape), rtol=1e-5)
