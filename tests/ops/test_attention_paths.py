"""scaled_dot_product_attention's two paths give the same results: the whole-problem path (small problems:
one block over every batch element and head) and the tiled path, over every option.

Each case runs forward + backward once with the whole-problem path forced
(``flash.tuning(whole_problem_scores=...)`` huge) and once tiled (0), with the default tiling and with small
tiles that split rows, keys and heads; outputs and the gradients of q, k, v and a float mask must agree
(float64 rtol 1e-12, float32 rtol 1e-5). Dropout must draw the very same keep mask on both paths.
"""

import threading

import numpy as np
import pytest

import ops
import tape
from ops._kernels import flash, runtime

SDPA = ops.scaled_dot_product_attention
WHOLE, TILED = "whole", "tiled"
TOLERANCE = {np.float64: (1e-12, 1e-14), np.float32: (1e-5, 1e-6)}  # rtol, atol (atol scaled by the values)


def use_path(path, small_tiles=False, keys_major=False):
    """The kernels' tuning for a path (a context manager). Small tiles: rows, keys and heads split, tile sizes
    that divide nothing, causal diagonal squares split down to single rows, two threads. ``keys_major``: the
    whole-problem forward lays its scores out keys-major (else rows-major), whatever the crossover measured on this
    machine says."""
    small = dict(block_rows=3, block_keys=4, tile_elements=3 * 9, workers=2, diagonal_rows=1) if small_tiles else {}
    layout = dict(keys_major_keys=1 << 30 if keys_major else 0)
    return flash.tuning(whole_problem_scores=1 << 40 if path == WHOLE else 0, **small, **layout)


def forward_backward(q, k, v, mask, mask_grad, dtype, options):
    arrays = [a.astype(dtype) for a in (q, k, v)]
    tensors = [tape.tensor(a, requires_grad=True) for a in arrays]
    if mask is not None:
        mask = mask if mask.dtype == np.bool_ else mask.astype(dtype)
        tensors.append(tape.tensor(mask, requires_grad=mask_grad))
    extra = {"rng": np.random.default_rng(options.pop("rng_seed"))} if "rng_seed" in options else {}
    out = SDPA(*tensors, **options, **extra)
    g = np.random.default_rng(99).standard_normal(out.shape).astype(dtype)
    out.backward(g)
    return [out.numpy()] + [None if t.grad is None else t.grad.numpy() for t in tensors]


def qkv(rng, q_shape, k_shape, v_shape):
    return rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)


def fill_rows(rng, shape):
    """A float mask whose row 1 is a finite fill (-1e9 everywhere): uniform attention, not masking."""
    mask = rng.standard_normal(shape)
    mask[..., 1, :] = -1e9
    return mask


L, S = 7, 9
BASE = ((2, 3, L, 4), (2, 3, S, 4), (2, 3, S, 5))  # E = 4 != Ev = 5
# name -> (shapes, mask maker (rng -> array) or None, mask requires grad, options)
CASES = {
    "plain": (BASE, None, False, {}),
    "causal top-left, L < S": (BASE, None, False, dict(is_causal=True)),
    "causal bottom-right, L < S": (BASE, None, False, dict(is_causal=True, causal_alignment="bottom_right")),
    "causal top-left, L > S": (((2, 2, S, 3), (2, 2, L, 3), (2, 2, L, 2)), None, False, dict(is_causal=True)),
    "causal bottom-right, L > S: empty rows": (((2, 2, S, 3), (2, 2, L, 3), (2, 2, L, 2)), None, False,
                                               dict(is_causal=True, causal_alignment="bottom_right")),
    "bool mask (L,S) with an empty row": (BASE, lambda r: (r.random((L, S)) < 0.6) & (np.arange(L) != 2)[:, None],
                                          False, {}),
    "bool mask (B,1,1,S) + causal": (BASE, lambda r: r.random((2, 1, 1, S)) < 0.7, False, dict(is_causal=True)),
    "bool mask (H,L,S)": (BASE, lambda r: r.random((3, L, S)) < 0.5, False, {}),
    "float mask (L,S) requiring grad": (BASE, lambda r: r.standard_normal((L, S)), True, {}),
    "float mask (B,H,L,S) with -inf, requiring grad": (
        BASE, lambda r: np.where(r.random((2, 3, L, S)) < 0.3, -np.inf, r.standard_normal((2, 3, L, S))), True, {}),
    "float mask (1,S) + causal bottom-right": (BASE, lambda r: r.standard_normal((1, S)), True,
                                               dict(is_causal=True, causal_alignment="bottom_right")),
    "float mask (L,1), not requiring grad": (BASE, lambda r: r.standard_normal((L, 1)), False, {}),
    "float mask (B,1,L,1)": (BASE, lambda r: r.standard_normal((2, 1, L, 1)), True, {}),
    "finite fill rows (-1e9)": (BASE, lambda r: fill_rows(r, (3, L, S)), True, {}),
    "lengths 0 and full": (BASE, None, False, dict(key_padding_lengths=[0, S])),
    "lengths + float mask + causal bottom-right": (BASE, lambda r: r.standard_normal((L, S)), True,
                                                   dict(key_padding_lengths=[5, 2], is_causal=True,
                                                        causal_alignment="bottom_right")),
    "lengths + bool mask": (BASE, lambda r: r.random((2, 1, L, S)) < 0.7, False, dict(key_padding_lengths=[S, 3])),
    "GQA 4 on 2": (((2, 4, L, 3), (2, 2, S, 3), (2, 2, S, 3)), None, False, dict(enable_gqa=True)),
    "GQA 6 on 3 and 1 (K, V head counts differ)": (((1, 6, L, 3), (1, 3, S, 3), (1, 1, S, 2)), None, False,
                                                   dict(enable_gqa=True, is_causal=True)),
    "broadcast heads (K 1, V 3)": (((2, 3, L, 3), (2, 1, S, 3), (2, 3, S, 2)), None, False, {}),
    "broadcast query head": (((2, 1, L, 3), (2, 3, S, 3), (2, 3, S, 2)), lambda r: r.standard_normal((3, L, S)),
                             True, {}),
    "dropout": (BASE, None, False, dict(dropout_p=0.4, rng_seed=5)),
    "dropout + float mask + causal": (BASE, lambda r: r.standard_normal((L, S)), True,
                                      dict(dropout_p=0.3, rng_seed=6, is_causal=True)),
    "dropout + GQA + lengths + causal bottom-right": (
        ((2, 4, L, 3), (2, 2, S, 3), (2, 2, S, 2)), None, False,
        dict(dropout_p=0.5, rng_seed=7, enable_gqa=True, key_padding_lengths=[4, 0], is_causal=True,
             causal_alignment="bottom_right")),
    "3-D": (((3, L, 4), (3, S, 4), (3, S, 2)), lambda r: r.standard_normal((L, S)), True, dict(is_causal=True)),
    "2-D": (((L, 4), (S, 4), (S, 2)), None, False, dict(is_causal=True, causal_alignment="bottom_right")),
    "5-D, broadcast batch dims": (((2, 1, 2, L, 3), (1, 3, 2, S, 3), (1, 3, 2, S, 2)),
                                  lambda r: r.standard_normal((3, 1, L, S)), True,
                                  dict(key_padding_lengths=[[6, 0, 9]])),
    "mask with batch dims that q and k lack": (((1, 2, L, 3), (1, 2, S, 3), (3, 2, S, 2)),
                                               lambda r: r.standard_normal((3, 1, L, S)), True, {}),
    "scale 0": (BASE, None, False, dict(scale=0.0, is_causal=True)),
    "large scores (the forward takes the row max)": (BASE, None, False, dict(scale=3.0, is_causal=True)),
    "negative scale": (BASE, lambda r: r.random((L, S)) < 0.7, False, dict(scale=-0.6)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("keys_major", [False, True], ids=["whole rows-major", "whole keys-major"])
@pytest.mark.parametrize("small_tiles", [False, True], ids=["default tiles", "small tiles"])
@pytest.mark.parametrize("name", list(CASES))
def test_whole_problem_and_tiled_paths_agree(name, small_tiles, keys_major, dtype):
    shapes, make_mask, mask_grad, options = CASES[name]
    rng = np.random.default_rng(sorted(CASES).index(name))
    q, k, v = qkv(rng, *shapes)
    mask = None if make_mask is None else make_mask(rng)
    options = {key: np.array(value) if key == "key_padding_lengths" else value for key, value in options.items()}
    with use_path(WHOLE, keys_major=keys_major):
        whole = forward_backward(q, k, v, mask, mask_grad, dtype, dict(options))
    with use_path(TILED, small_tiles):
        tiled = forward_backward(q, k, v, mask, mask_grad, dtype, dict(options))
    rtol, atol = TOLERANCE[dtype]
    for what, a, b in zip(("output", "dq", "dk", "dv", "dmask"), whole, tiled):
        if b is None:
            assert a is None, what
            continue
        assert a.dtype == b.dtype == dtype and a.shape == b.shape, what
        assert np.isfinite(a).all(), what
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(1.0, np.abs(b).max()), err_msg=what)


def test_the_setting_chooses_the_path(monkeypatch):
    """The whole-problem path runs no tile (and so no thread); the tiled path does."""
    calls = []
    run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda items, work, workers: (calls.append(len(items)),
                                                                     run(items, work, workers)))
    rng = np.random.default_rng(0)
    q, k, v = qkv(rng, *BASE)
    with flash.tuning(whole_problem_scores=2 * 3 * L * S):  # exactly this problem's score count: whole
        forward_backward(q, k, v, None, False, np.float64, {})
    assert calls == []
    with flash.tuning(whole_problem_scores=2 * 3 * L * S - 1):
        forward_backward(q, k, v, None, False, np.float64, {})
    assert len(calls) == 2 and all(n > 0 for n in calls)


def test_tuning_is_scoped_to_the_block_and_the_thread():
    """``tuning`` changes the settings for its block only (nesting restores the outer ones, also after an
    error), and only in its own thread: another thread's kernels keep the defaults meanwhile."""
    default = flash.current_tuning()
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other_thread():
        inside.wait(10)
        seen["tuning"] = flash.current_tuning()
        q = np.zeros((1, 2, 8, 4))
        seen["whole"] = flash._Problem(q, q, q, None, scale=1.0, causal_offset=None, lengths=None, dropout_p=0.0,
                                       seed=0, enable_gqa=False).whole
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with flash.tuning(whole_problem_scores=0, workers=1) as outer:
        assert flash.current_tuning() == outer and outer.whole_problem_scores == 0 and outer.workers == 1
        with pytest.raises(RuntimeError), flash.tuning(block_rows=4):
            assert flash.current_tuning() == flash.Tuning(block_rows=4, workers=1, whole_problem_scores=0)
            raise RuntimeError
        assert flash.current_tuning() == outer
        inside.set()
        done.wait(10)
    thread.join()
    assert seen == {"tuning": default, "whole": True}
    assert flash.current_tuning() == default == flash.Tuning()


@pytest.mark.parametrize("changes", [dict(block_rows=0), dict(workers=-1), dict(tile_elements=None),
                                     dict(whole_problem_scores=1.5), dict(block_cols=4),
                                     dict(keys_major_keys=-1)])
def test_tuning_rejects_bad_settings(changes):
    with pytest.raises((ValueError, TypeError)):
        with flash.tuning(**changes):
            pass
    assert flash.current_tuning() == flash.Tuning()


@pytest.mark.parametrize("shape", [(1, 8, 1024, 64), (1, 4, 4096, 64)])
def test_the_benchmarks_large_problems_are_tiled(shape):
    q = np.zeros(shape, np.float32)
    problem = flash._Problem(q, q, q, None, scale=1.0, causal_offset=0, lengths=None, dropout_p=0.0, seed=0,
                             enable_gqa=False)
    assert not problem.whole and len(problem.tiles) > 1


def test_the_training_examples_attention_runs_whole():
    q = np.zeros((16, 4, 32, 16), np.float32)
    problem = flash._Problem(q, q, q, None, scale=1.0, causal_offset=0, lengths=None, dropout_p=0.0, seed=0,
                             enable_gqa=False)
    assert problem.whole and problem.tiles == []


def test_the_keys_major_crossover_is_measured_once_and_the_setting_overrides_it(monkeypatch):
    """The whole-problem forward lays its scores out keys-major when S is at most the crossover measured at first
    use (once per process), or at most ``keys_major_keys`` when that is set."""
    measured = []
    monkeypatch.setattr(flash, "_KEYS_MAJOR", [])
    monkeypatch.setattr(flash, "_measure_keys_major", lambda: measured.append(1) or 8)
    layouts = []
    forward_block = flash._forward_block
    monkeypatch.setattr(flash, "_forward_block", lambda *a, keys_major, **k: (layouts.append(keys_major),
                                                                              forward_block(*a, keys_major=keys_major,
                                                                                            **k))[1])
    rng = np.random.default_rng(0)
    for s in (8, 9):
        q, k, v = qkv(rng, (2, 3, 5, 4), (2, 3, s, 4), (2, 3, s, 4))
        forward_backward(q, k, v, None, False, np.float64, {})
    with flash.tuning(keys_major_keys=9):
        forward_backward(q, k, v, None, False, np.float64, {})
    assert measured == [1] and layouts == [True, False, True]


@pytest.mark.parametrize("L,n_keys,offset", [(64, 64, 0), (37, 64, 0), (64, 37, 0), (50, 61, 11), (61, 50, -11),
                                              (40, 40, None), (40, 23, None), (9, 0, 0), (20, 30, -25)])
@pytest.mark.parametrize("rows,chunk,smallest", [(16, 16, 4), (13, 7, 1), (64, 64, 64), (5, 100, 2)])
def test_the_backward_pieces_cover_every_visible_score_once(L, n_keys, offset, rows, chunk, smallest):
    """The backward's pieces of all row blocks cover each score that a row sees (key j < n_keys, and j <= i +
    offset when causal) exactly once and nothing else but the diagonal squares' masked parts: none with one-row
    squares (smallest=1); no piece lies wholly where no row of it sees a key; no piece is longer than chunk
    keys outside the diagonal."""
    i, j = np.arange(L)[:, None], np.arange(n_keys)[None, :]
    visible = np.ones((L, n_keys), bool) if offset is None else j <= i + offset
    count = np.zeros((L, n_keys), int)
    for i0 in range(0, L, rows):
        i1 = min(L, i0 + rows)
        for a, b, j0, j1 in flash._pieces(i0, i1, n_keys, offset, chunk, smallest):
            assert i0 <= a < b <= i1 and 0 <= j0 < j1 <= n_keys
            assert visible[a:b, j0:j1].any()
            count[a:b, j0:j1] += 1
            if visible[a:b, j0:j1].all():
                assert j1 - j0 <= max(chunk, smallest)
    assert (count[visible] == 1).all() and count.max(initial=0) <= 1
    if smallest == 1:
        assert (count == visible).all()
    else:  # the masked scores computed lie within a diagonal square of at most `smallest` rows
        hidden_done = np.argwhere(count > visible)
        assert all(j - i - offset <= smallest for i, j in hidden_done)
