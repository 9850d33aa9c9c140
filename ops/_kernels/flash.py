"""Tiled numpy kernels for scaled dot-product attention (FlashAttention-2 style, Dao 2023): ``attention_forward``
(the output and the row log-sum-exp as its two terms, row_max and row_log_sum) and ``attention_backward`` (dQ,
dK, dV and a float mask's gradient together, recomputing P tile by tile from those two terms), and
``dropout_keep_mask`` (Philox draws addressed by seed, head, query row and key, so any tiling regenerates the
forward's mask).

A tile is a block of query rows of a few K/V groups of one batch element (a GQA group's query heads stacked as
rows against their one K/V head); the forward takes every key the block sees at once, the backward also splits
the keys (``_pieces``). Small problems (``Tuning.whole_problem_scores``) run as one block over every batch
element and head. Both paths share the block math (``_forward_block``, ``_backward_block``,
``_Problem.mask_scores``). Tiles run on ``runtime``'s pool, writing their products into a ``buffers.Scratch``.
How a problem is cut and run is a ``Tuning``, changed per block of code and thread by ``tuning(...)``.
The derivation, the numerics and the measurements: docs/attention.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import buffers, runtime

__all__ = [
    "Tuning",
    "tuning",
    "current_tuning",
    "Layout",
    "layout",
    "attention_forward",
    "attention_backward",
    "dropout_keep_mask",
    "dropout_keep_masks",
]


class _Units(NamedTuple):
    """The units the kernels keep scores and row statistics in: scores times ``factor``, exponentiated by ``exp``,
    row sums logged by ``log``."""

    factor: float
    exp: np.ufunc
    log: np.ufunc


# numpy's float32 exp2 runs about twice as fast as its exp on arguments in its normal range (0.2 against 0.4 ns),
# but 5-7x slower than exp where its result underflows (the -inf of a mask, the causal limit, padding): problems
# without any masking keep their scores times log2(e) and use exp2; masked ones use exp (a float mask is then also
# added in natural units like torch's, so that a -1e9 fill rounds float64 scores as torch's do)
BASE_2, BASE_E = _Units(1 / math.log(2), np.exp2, np.log2), _Units(1.0, np.exp, np.log)


@dataclass(frozen=True)
class Tuning:
    """How the kernels cut a problem into tiles and run them. Defaults are the tuned values (docs/attention.md)."""

    workers: int | None = None
    """Threads that run tiles; None = the CPUs this process may use. 1 runs the tiles in order."""
    block_rows: int | None = None
    """Query rows per tile; None picks them from tile_elements (at least min_rows)."""
    block_keys: int | None = None
    """Keys per backward tile (the forward takes all visible keys at once); None picks them from tile_elements."""
    tile_elements: int = 1 << 18
    """Scores per tile the automatic choices aim at (one float32 tile: 1 MiB)."""
    min_rows: int = 256
    """Fewest query rows per tile (when L has them): taller tiles make the key-side matmuls (dK, dV) run faster."""
    diagonal_rows: int = 64
    """Causal backward: a row block's diagonal square is halved (its masked upper-right quarter skipped) while it
    has more rows than this."""
    whole_problem_scores: int = 1 << 20
    """Problems with at most this many scores (batch elements x heads x L x S) run as one block over every
    batch element and head, without threads; larger ones are tiled. 0 always tiles."""
    keys_major_keys: int | None = None
    """The whole-problem forward lays its scores out keys-major (``_scores``) when S is at most this; None = the
    crossover measured on this machine at first use (``keys_major_limit``); 0 never."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value, optional = getattr(self, field.name), field.default is None
            least = 0 if field.name in ("whole_problem_scores", "keys_major_keys") else 1
            if not (value is None and optional) and not (type(value) is int and value >= least):
                allowed = f"an int >= {least}" + (" or None" if optional else "")
                raise ValueError(f"tuning: {field.name} must be {allowed}, got {value!r}")


_TUNING = contextvars.ContextVar("minitape_attention_tuning", default=Tuning())  # noqa: B039 (frozen)


def current_tuning() -> Tuning:
    """The tuning the kernels use in this thread / context."""
    return _TUNING.get()


@contextlib.contextmanager
def tuning(**changes):
    """Run the block with these ``Tuning`` fields changed, in this thread / context only (other threads keep
    theirs; a new thread starts from the defaults); the previous tuning is back on exit. Yields the tuning."""
    token = _TUNING.set(dataclasses.replace(_TUNING.get(), **changes))
    try:
        yield _TUNING.get()
    finally:
        _TUNING.reset(token)


@dataclass(frozen=True)
class Layout:
    """Shapes of one attention call. Inputs are promoted to rank R = len(batch_shape) + 3."""

    batch_shape: tuple
    heads: int  # H: output heads
    kv_groups: int  # K/V heads the kernel iterates over per batch element (H = kv_groups * group_size)
    group_size: int  # query heads sharing one K/V head (GQA group, or a broadcast head)
    L: int
    S: int
    E: int
    Ev: int
    out_shape: tuple  # the user-visible output shape


def layout(q, k, v, enable_gqa=False) -> Layout:
    """The layout of validated inputs (see ``ops.attention`` for the checks and their messages)."""
    rank = max(q.ndim, k.ndim, v.ndim, 3)
    qs, ks, vs = (_promoted_shape(a.shape, rank) for a in (q, k, v))
    batch_shape = tuple(np.broadcast_shapes(qs[:-3], ks[:-3], vs[:-3]))
    hq, hk, hv = qs[-3], ks[-3], vs[-3]
    heads = hq if enable_gqa else max(hq, hk, hv)
    group = math.gcd(heads // hk, heads // hv) if heads else 1  # no heads: no K/V groups
    L, E = qs[-2:]
    S, Ev = vs[-2], vs[-1]
    out_rank = max(q.ndim, k.ndim, v.ndim)
    full = batch_shape + (heads, L, Ev)
    return Layout(batch_shape, heads, heads // group, group, L, S, E, Ev, full[len(full) - out_rank :])


def _promoted_shape(shape, rank):
    return (1,) * (rank - len(shape)) + tuple(shape)


def _promote(a, rank):
    return a.reshape(_promoted_shape(a.shape, rank))


def _own_index(shape, index):
    """The index into an array broadcast over ``index``'s dims (size-1 dims stay at 0)."""
    return tuple(i if n > 1 else 0 for n, i in zip(shape, index))


def _sum_to(a, shape):
    """a summed over the dims where ``shape`` (of the same rank) is 1: the gradient of a broadcast input."""
    axes = tuple(axis for axis, (n, m) in enumerate(zip(shape, a.shape)) if n == 1 and m != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


def _group_owner(n_heads, lay: Layout):
    """For each K/V group, which of an input's n_heads heads it uses (h // (H / n) for its first query head)."""
    return np.arange(lay.kv_groups) * lay.group_size // (lay.heads // n_heads)


def _heads(a, lay: Layout):
    """a's heads (..., n, S, d) as (..., kv_groups, S, d): a view, or a copy when heads must repeat (only when
    K and V have different head counts, or one of them is broadcast over heads and the other is not)."""
    return a if a.shape[-3] == lay.kv_groups else a[..., _group_owner(a.shape[-3], lay), :, :]


def _sum_heads(grouped, n_heads):
    """A (..., kv_groups, S, d) K or V gradient summed onto the input's n_heads heads: groups [0, kv_groups / n)
    use head 0, and so on (n divides kv_groups, see ``layout``)."""
    groups = grouped.shape[-3]
    if n_heads == groups:
        return grouped
    return grouped.reshape(grouped.shape[:-3] + (n_heads, groups // n_heads) + grouped.shape[-2:]).sum(axis=-3)


def _pieces(i0, i1, n_keys, causal_offset, chunk, smallest):
    """(i0, i1, j0, j1) pieces covering the keys [0, n_keys) that rows [i0, i1) see: chunks of at most ``chunk``
    keys; under the causal limit (key j seen by row i when j <= i + offset) the chunks of the keys every row sees,
    then the diagonal square (``_diagonal``). Nothing for rows that see no key."""
    visible = n_keys if causal_offset is None else min(n_keys, i0 + causal_offset)  # seen by every row
    for j0 in range(0, max(0, visible), chunk):
        yield i0, i1, j0, min(visible, j0 + chunk)
    if causal_offset is not None:
        yield from _diagonal(i0, i1, n_keys, causal_offset, smallest)


def _diagonal(a, b, n_keys, offset, smallest):
    """Pieces covering the keys [a + offset, b + offset) that some row of [a, b) sees: the square halved while
    it is taller than ``smallest`` rows -- its lower-left quarter is seen by every row of it and computed
    unmasked, its upper-right quarter by none and skipped, its two diagonal quarters split again."""
    j0, j1 = max(0, a + offset), min(n_keys, b + offset)
    if j0 >= j1:
        return
    if b - a <= smallest:
        yield a, b, j0, j1
        return
    mid = (a + b) // 2
    yield from _diagonal(a, mid, n_keys, offset, smallest)
    lower_left = max(0, a + offset), min(n_keys, mid + offset)
    if lower_left[0] < lower_left[1]:
        yield (mid, b, *lower_left)
    yield from _diagonal(mid, b, n_keys, offset, smallest)


def _tile_shape(lay: Layout, n_keys, tune: Tuning):
    """(query rows per block, K/V groups per tile): rows from block_rows or so that one head's tile holds
    about tile_elements / 4 scores (at least min_rows, for matmuls that run well), then as many groups as
    fit tile_elements."""
    keys = max(1, min(lay.S, n_keys))
    elements = tune.tile_elements
    group = max(1, lay.group_size)  # 0 query heads, no queries or an empty batch: no tiles, but no division by 0
    rows = tune.block_rows or max(1, min(lay.L, max(tune.min_rows, elements // (4 * keys * group))))
    groups = max(1, min(lay.kv_groups, elements // (rows * keys * group)))
    return rows, groups


def _group_tiles(batch, piece, groups, lay: Layout, elements):
    """The tiles of one (i0, i1, j0, j1) piece over the K/V groups, in blocks of ``groups`` or, for a piece
    smaller than a tile (a diagonal one), of as many as fit ``elements`` scores: fewer, larger matmul batches."""
    G = max(1, lay.group_size)
    i0, i1, j0, j1 = piece
    groups = max(groups, min(lay.kv_groups, elements // ((i1 - i0) * (j1 - j0) * G)))
    for g0 in range(0, lay.kv_groups, groups):
        g1 = min(lay.kv_groups, g0 + groups)
        yield _Tile(batch, g0, g1, g0 * lay.group_size, g1 * lay.group_size, *piece)


@dataclass(frozen=True)
class _Tile:
    """One work item: K/V groups [g0, g1) (query heads [h0, h1)) of one batch element, query rows
    [i0, i1), keys [j0, j1)."""

    batch: _Batch
    g0: int
    g1: int
    h0: int
    h1: int
    i0: int
    i1: int
    j0: int
    j1: int


def _mask_tile(mask_b, tile):
    """The (heads, rows, keys) slice of one batch element's mask (size-1 dims kept for broadcasting)."""
    heads = slice(tile.h0, tile.h1) if mask_b.shape[-3] > 1 else slice(None)
    rows = slice(tile.i0, tile.i1) if mask_b.shape[-2] > 1 else slice(None)
    cols = slice(tile.j0, tile.j1) if mask_b.shape[-1] > 1 else slice(None)
    return mask_b[heads, rows, cols]


# -- dropout ----------------------------------------------------------------------------------------------
def dropout_keep_mask(seed, head_index, rows, keys, L, S, p) -> np.ndarray:
    """Keep flags for query rows [i0, i1) = ``rows`` and keys [j0, j1) = ``keys`` of flat head ``head_index``
    (batch element * heads + head); each (head, row, key) owns one 64-bit Philox draw, kept when it is
    >= p * 2**64, so any tiling regenerates the same mask."""
    return _keep_flags(seed, head_index, 1, rows, keys, L, S, p)[0]


def dropout_keep_masks(seed, shape, p) -> np.ndarray:
    """``dropout_keep_mask`` of every flat head of scores of ``shape`` (..., L, S), whole, in that shape."""
    L, S = shape[-2:]
    return _keep_flags(seed, 0, math.prod(shape[:-2]), (0, L), (0, S), L, S, p).reshape(shape)


def _keep_flags(seed, first_head, n_heads, rows, keys, L, S, p) -> np.ndarray:
    """``dropout_keep_mask`` of flat heads [first_head, first_head + n_heads) as (n_heads, rows, keys); one
    run of draws when the rows are all L rows (the heads' draws are then consecutive)."""
    (i0, i1), (j0, j1) = rows, keys
    row_stride = -(-S // 4) * 4  # Philox yields 4 draws per counter step: rows start on a step
    threshold = np.uint64(min(int(p * 2.0**64), 2**64 - 1))

    def draws(head, n):
        start = (head * L + i0) * row_stride
        return np.random.Philox(counter=start // 4, key=seed).random_raw(n * (i1 - i0) * row_stride)

    if (i0, i1) == (0, L):
        raw = draws(first_head, n_heads)
    else:
        raw = np.concatenate([draws(h, 1) for h in range(first_head, first_head + n_heads)])
    return raw.reshape(n_heads, i1 - i0, row_stride)[..., j0:j1] >= threshold


# -- the math of one block, shared by the tiles and the whole-problem path ----------------------------------
def _scores(x, y, G, keys_major, take=None):
    """(s, s4): x @ y^T for x (..., groups, G * t, d) and y (..., groups, n, d), as s (..., groups, G * t, n) and
    the same array as s4 (..., groups * G, t, n). ``keys_major``: both are views of one array whose first axis is
    the key, so that the scores of one row lie a whole key's worth of rows apart and reductions over the keys run
    as elementwise passes over every row at once (numpy reduces many short contiguous rows one at a time, over
    10x slower at n = 32); the masks and dropout flags are then given in that order too (``_keys_major_copy``).
    Its matmul is y @ x^T with x^T made contiguous: OpenBLAS's small-matrix kernels run a transposed operand
    about 2x slower than the copy costs."""
    if not keys_major:
        s = _product(x, y.swapaxes(-1, -2), take, "s")
        return s, s.reshape(s.shape[:-3] + (s.shape[-3] * G, s.shape[-2] // G, s.shape[-1]))
    *lead, groups, rows, _ = np.broadcast_shapes(x.shape, y.shape[:-2] + (1, 1))
    n = y.shape[-2]
    buffer = buffers.empty((n, *lead, groups, rows), np.result_type(x, y))
    last = buffer.ndim - 1
    np.matmul(y, np.ascontiguousarray(x.swapaxes(-1, -2)), out=buffer.transpose(*range(1, last), 0, last))
    s4 = buffer.reshape((n, *lead, groups * G, rows // G)).transpose(*range(1, last + 1), 0)
    return buffer.transpose(*range(1, last + 1), 0), s4


def _is_keys_major(s):
    """Whether scores s (..., rows, keys) lie keys-major (``_scores``): a key's rows closer than a row's keys."""
    return s.shape[-1] > 1 and s.shape[-2] > 1 and abs(s.strides[-1]) > abs(s.strides[-2])


def _keys_major_copy(a):
    """``a`` (..., rows, keys) as an array of the same shape laid out like ``_scores``' keys-major ones (rows
    contiguous), so that elementwise passes combining the two walk both in memory order."""
    return np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)


def _forward_block(
    q, kg, v_ext, hide, keep, *, scale, units, dropout_p, may_empty, keys_major=False, out=None, take=None, shift=True
):
    """Output, row max m and log row sum log l of one block of queries against keys [0, n).

    q (..., groups, G, rows, E) unscaled queries; kg (..., groups, n, E); v_ext (..., groups, n, Ev), with
    a column of ones appended when there is no dropout and not ``keys_major`` (P @ [V, 1] gives the
    unnormalised output and the row sums in one product; keys-major scores sum their rows faster on their
    own). ``hide(scores)`` applies the masks in place to scores shaped (..., heads, rows, n); ``keep``: the
    dropout flags in that shape, or None. Leading dims broadcast. ``keys_major``: see ``_scores``.
    ``take``: the tiles' ``buffers.Scratch`` the products are written into, or None (fresh arrays).
    Not ``shift``: the row max is taken as 0 (no max pass and no subtraction), for scores known to be small
    (``_bounded``).
    Returns o (..., heads, rows, Ev) (written into ``out`` when given) and m, log l (..., heads, rows); 0, 0, 0
    on rows that see no key.
    """
    *lead, groups, G, t, E = q.shape
    q_blk = np.multiply(q, scale * units.factor, dtype=q.dtype).reshape(*lead, groups, G * t, E)
    s, s4 = _scores(q_blk, kg, G, keys_major, take)
    hide(s4)
    if shift:
        m = s4.max(axis=-1, keepdims=True)
        if may_empty:
            m[np.isneginf(m)] = 0
        s4 -= m
    else:  # |scores| within _bounded's bound: exp cannot overflow, nor the row sums underflow
        m = np.zeros(s4.shape[:-1] + (1,), s4.dtype)
    units.exp(s4, out=s4)
    if keys_major and not dropout_p:
        Ev = v_ext.shape[-1]
        row_sum = s4.sum(axis=-1, keepdims=True)
        o = _product(s, v_ext, take, "o")
        o = o.reshape(o.shape[:-3] + (groups * G, t, Ev))
        denominator = row_sum
    elif dropout_p:
        Ev = v_ext.shape[-1]
        row_sum = s4.sum(axis=-1, keepdims=True)
        s4 *= keep
        o = _product(s, v_ext, take, "o")
        o = o.reshape(o.shape[:-3] + (groups * G, t, Ev))
        denominator = row_sum * (1 - dropout_p)
    else:
        Ev = v_ext.shape[-1] - 1
        ol = _product(s, v_ext, take, "o")
        ol = ol.reshape(ol.shape[:-3] + (groups * G, t, Ev + 1))
        o, row_sum = ol[..., :Ev], ol[..., Ev:]
        denominator = row_sum
    if may_empty:
        empty = row_sum == 0
        if empty.any():
            denominator = np.where(empty, 1, denominator)
            row_sum = np.where(empty, 1, row_sum)
    return np.divide(o, denominator, out=out), m[..., 0], units.log(row_sum[..., 0])


def _backward_block(
    q, kg, vg, go, m, log_l, delta, hide, keep, *, k_ones=None, v_ones=None, scale, units, dropout_p, needs, take=None
):
    """(dq, dk, dv, ds) of one block of queries against keys [j0, j1); None where ``needs`` (dq, dk, dv) is
    False.

    q (..., groups, G, rows, E) unscaled; kg, vg (..., groups, n, E / Ev) the block's keys and values;
    go (..., groups, G, rows, Ev) the output gradient; m, log_l, delta (..., groups, G, rows) the row
    statistics and D = rowsum(dO * O). ``hide`` and ``keep`` as in ``_forward_block``. With ``k_ones``,
    ``v_ones`` ([K, 1] and [V, 1]), lse and D ride along in the matmuls as an extra column. ``take`` as in
    ``_forward_block`` (the results are then views of it: used before the thread's next tile).
    Returns dq (..., heads, rows, E) and ds (..., heads, rows, n) by query head, dk, dv (..., groups, n, d)
    by K/V group (a group's heads summed by the matmul). Leading dims broadcast.
    """
    need_q, need_k, need_v = needs
    *lead, groups, G, t, E = q.shape
    n, Ev = vg.shape[-2:]
    dtype = q.dtype
    rows = (*lead, groups, G * t)
    scores = (*lead, groups * G, t)
    go = go.reshape(*rows, Ev)
    if k_ones is not None:  # [q*scale, -lse] @ [k, 1]^T = S - lse
        q_blk = _augmented(q, -(m + log_l), scale * units.factor).reshape(*rows, E + 1)
        p = _product(q_blk, k_ones.swapaxes(-1, -2), take, "p")
        q_blk = q_blk[..., :E]
    else:
        q_blk = np.multiply(q, scale * units.factor, dtype=dtype).reshape(*rows, E)
        p = _product(q_blk, kg.swapaxes(-1, -2), take, "p")
    p4 = p.reshape(p.shape[:-3] + (groups * G, t, n))
    hide(p4)
    if k_ones is None:  # (S - m) - log l: exact even when a finite fill makes S and m huge
        p4 -= m.reshape(*scores, 1)
        p4 -= log_l.reshape(*scores, 1)
    units.exp(p4, out=p4)
    dv = None
    if dropout_p:
        keep_scale = 1 / (1 - dropout_p)
        if need_v:
            dropped = np.multiply(p4, keep, dtype=dtype)
            dropped *= keep_scale
            dv = _product(dropped.reshape(p.shape).swapaxes(-1, -2), go, take, "dv")
            del dropped
        ds = _product(go, vg.swapaxes(-1, -2), take, "ds")
        ds4 = ds.reshape(ds.shape[:-3] + (groups * G, t, n))
        ds4 *= keep
        ds4 *= keep_scale
        ds4 -= delta.reshape(*scores, 1)
    else:
        if need_v:
            dv = _product(p.swapaxes(-1, -2), go, take, "dv")
        if v_ones is not None:  # [dO, -D] @ [V, 1]^T = dP - D
            ds = _product(_augmented(go, -delta.reshape(rows)), v_ones.swapaxes(-1, -2), take, "ds")
        else:
            ds = _product(go, vg.swapaxes(-1, -2), take, "ds")
            ds -= delta.reshape(*rows, 1)
    ds *= p  # dS = P * (dP - D)
    dq = dk = None
    if need_q:
        dq = _product(ds, kg, take, "dq")
        dq = dq.reshape(dq.shape[:-3] + (groups * G, t, E))
        dq *= scale
    if need_k:  # dK = scale * dS^T Q = dS^T (scale * factor * Q) / factor
        dk = _product(ds.swapaxes(-1, -2), q_blk, take, "dk")
        if units.factor != 1:
            dk *= 1 / units.factor
    return dq, dk, dv, ds.reshape(ds.shape[:-3] + (groups * G, t, n))


# -- the problem ------------------------------------------------------------------------------------------
class _Batch:
    """One batch element: its index, visible key count, mask slice, and (after setup) grouped operands."""

    def __init__(self, flat, index, n_keys, mask):
        self.flat, self.index, self.n_keys, self.mask = flat, index, n_keys, mask


class _Problem:
    """Inputs promoted to one rank, the masks, the tuning in force, and -- unless the problem is small enough to
    run whole (see ``Tuning.whole_problem_scores``) -- one ``_Batch`` per batch element and the list of tiles."""

    def __init__(self, q, k, v, mask, *, scale, causal_offset, lengths, dropout_p, seed, enable_gqa, backward=False):
        self.tune = _TUNING.get()
        self.lay = lay = layout(q, k, v, enable_gqa)
        rank = len(lay.batch_shape) + 3
        self.q, self.k, self.v = (_promote(a, rank) for a in (q, k, v))
        self.mask = None if mask is None else _promote(mask, rank)
        self.mask_is_bool = mask is not None and mask.dtype == np.bool_
        self.float_mask = mask is not None and not self.mask_is_bool
        self.scale, self.causal_offset, self.dropout_p, self.seed = scale, causal_offset, dropout_p, seed
        self.may_empty = mask is not None or causal_offset is not None or lengths is not None
        self.lengths = None if lengths is None else np.broadcast_to(lengths, lay.batch_shape)
        # bool masks are applied as "hidden" flags
        self.hidden = ~self.mask if self.mask_is_bool and self.mask is not None else self.mask
        self.units = BASE_E if self.may_empty else BASE_2  # may_empty: some mask, causal limit or padding
        n_scores = math.prod(lay.batch_shape) * lay.heads * lay.L * lay.S
        self.whole = 0 < n_scores <= self.tune.whole_problem_scores
        self.batches, self.tiles = [], []
        if not self.whole:
            self._make_tiles(backward)

    def _make_tiles(self, backward):
        """The tiles: per batch element, block of query rows and block of K/V groups, the backward's cover the
        keys the rows see in pieces (``_pieces``), the forward's take all of them at once (keys [0, kmax)).
        Largest first, so that the threads run out of work together."""
        lay, hidden, G, tune = self.lay, self.hidden, self.lay.group_size, self.tune
        for flat, b in enumerate(np.ndindex(*lay.batch_shape)):
            n_keys = lay.S if self.lengths is None else int(self.lengths[b])
            batch = _Batch(flat, b, n_keys, None if hidden is None else hidden[_own_index(hidden.shape[:-3], b)])
            self.batches.append(batch)
            rows, groups = _tile_shape(lay, n_keys, tune)
            chunk = tune.block_keys or max(tune.min_rows, tune.tile_elements // (rows * G))
            for i0 in range(0, lay.L, rows):
                i1 = min(lay.L, i0 + rows)
                pieces = list(_pieces(i0, i1, n_keys, self.causal_offset, chunk, tune.diagonal_rows))
                if not backward and pieces:  # the forward takes every key the block sees at once
                    pieces = [(i0, i1, 0, max(piece[3] for piece in pieces))]
                for piece in pieces:
                    self.tiles.extend(_group_tiles(batch, piece, groups, lay, tune.tile_elements))
        self.tiles.sort(key=lambda tile: -(tile.i1 - tile.i0) * (tile.j1 - tile.j0))

    def setup(self, batch, fused):
        """Per batch element: grouped queries and grouped K, V (with a ones column when ``fused``)."""
        lay = self.lay
        qb = self.q[_own_index(self.q.shape[:-3], batch.index)]
        batch.q = np.broadcast_to(qb, (lay.heads, lay.L, lay.E)).reshape(lay.kv_groups, lay.group_size, lay.L, lay.E)
        batch.kb = self.k[_own_index(self.k.shape[:-3], batch.index)]
        batch.vb = self.v[_own_index(self.v.shape[:-3], batch.index)]
        batch.kg, batch.vg = _heads(batch.kb, lay), _heads(batch.vb, lay)
        if fused:
            batch.k_ones, batch.v_ones = _augmented(batch.kg, 1), _augmented(batch.vg, 1)

    def whole_operands(self):
        """(q, kg, vg) of the whole problem: q broadcast to (batch..., groups, G, L, E), K and V grouped with
        their own batch dims (the matmuls broadcast them)."""
        lay = self.lay
        q = np.broadcast_to(self.q, lay.batch_shape + (lay.heads, lay.L, lay.E))
        q = q.reshape(lay.batch_shape + (lay.kv_groups, lay.group_size, lay.L, lay.E))
        return q, _heads(self.k, lay), _heads(self.v, lay)

    def mask_scores(self, s, hidden, rows, keys, padded=None):
        """Apply the masks in place to the scores s (..., heads, rows, keys) of query rows [i0, i1) = ``rows``
        against keys [j0, j1) = ``keys``: add a float mask, put -inf where a bool mask (``hidden``: its slice
        for s, True = hidden), the padding lengths (``padded``: (..., 1, 1, keys) flags) or the causal limit
        hide a key."""
        if hidden is not None:
            if self.mask_is_bool:
                np.copyto(s, -np.inf, where=hidden)
            else:
                s += hidden
        if padded is not None:
            np.copyto(s, -np.inf, where=padded)
        (i0, i1), (j0, j1) = rows, keys
        if self.causal_offset is not None:
            start = max(j0, i0 + self.causal_offset + 1)  # keys before start are visible to every row
            if 2 * (start - j0) < j1 - j0:
                start = j0  # a short visible prefix: the whole (contiguous) width runs faster than a strided part
            if start < j1:  # hidden above the diagonal: key j > i + offset
                above = np.arange(start, j1)[None, :] > (np.arange(i0, i1) + self.causal_offset)[:, None]
                if _is_keys_major(s):
                    above = _keys_major_copy(above)
                if start == j0:  # adding -inf there and 0 elsewhere is exact, and faster than a masked copy
                    s += np.where(above, s.dtype.type(-np.inf), s.dtype.type(0))
                else:
                    np.copyto(s[..., start - j0 :], -np.inf, where=above)

    def tile_hide(self, tile):
        """``mask_scores`` for a tile's scores."""
        mask = None if tile.batch.mask is None else _mask_tile(tile.batch.mask, tile)
        return lambda s: self.mask_scores(s, mask, (tile.i0, tile.i1), (tile.j0, tile.j1))

    def whole_hide(self, keys_major=False):
        """``mask_scores`` for the whole problem's scores (the lengths as a (batch..., 1, 1, S) bool mask); the
        mask laid out keys-major for keys-major scores (``_scores``)."""
        lay = self.lay
        padded = None if self.lengths is None else np.arange(lay.S) >= self.lengths[..., None, None, None]
        hidden = self.hidden if self.hidden is None or not keys_major else _keys_major_copy(self.hidden)
        return lambda s: self.mask_scores(s, hidden, (0, lay.L), (0, lay.S), padded)

    def keep(self, tile):
        """The dropout keep flags of a tile, (heads, rows, keys)."""
        lay = self.lay
        return _keep_flags(
            self.seed,
            tile.batch.flat * lay.heads + tile.h0,
            tile.h1 - tile.h0,
            (tile.i0, tile.i1),
            (tile.j0, tile.j1),
            lay.L,
            lay.S,
            self.dropout_p,
        )

    def whole_keep(self, keys_major=False):
        """The dropout keep flags of the whole problem, (batch..., heads, L, S): the tiles' flags (laid out
        keys-major for keys-major scores)."""
        lay = self.lay
        flags = _keep_flags(
            self.seed, 0, math.prod(lay.batch_shape) * lay.heads, (0, lay.L), (0, lay.S), lay.L, lay.S, self.dropout_p
        )
        flags = flags.reshape(lay.batch_shape + (lay.heads, lay.L, lay.S))
        return _keys_major_copy(flags) if keys_major else flags


def _product(a, b, take=None, name=""):
    """a @ b (matmul's broadcasting): into ``take(name, shape, dtype)`` when given (the tiles' ``buffers.Scratch``:
    their pages faulted in once a call, not once a tile), else a fresh array."""
    if take is None:
        return np.matmul(a, b)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return np.matmul(a, b, out=take(name, shape, np.result_type(a, b)))


def _zeros(shape, dtype):
    """``np.zeros`` from ``buffers`` (an output or gradient of the last call, when no one holds it any more)."""
    a = buffers.empty(shape, dtype)
    a.fill(0)
    return a


def _bounded(q, k, v, scale) -> bool:
    """Whether the forward may skip its row max (and its subtraction): every score scale * q_i . k_j is, by
    Cauchy-Schwarz, at most 2^b in exp's units with b a quarter of the largest exponent of q's dtype (32 in
    float32), so exp of the scores neither overflows nor, summed over a row, underflows; and S 2^b max |v|
    stays finite, so P @ V cannot overflow either. False for non-finite inputs (a NaN or inf bound)."""
    if not q.size or not k.size:
        return True
    norms = [np.sqrt(np.max(np.einsum("...d,...d->...", a, a))) for a in (q, k)]
    exponent = abs(scale) / math.log(2) * norms[0] * norms[1]  # in powers of 2, whatever exp's base
    largest = max(np.max(v), -np.min(v)) if v.size else 0
    top = np.finfo(q.dtype).maxexp
    with np.errstate(divide="ignore"):
        return bool(exponent <= top / 4 and exponent + math.log2(k.shape[-2] or 1) + np.log2(largest) <= top - 2)


def _augmented(a, column, scale=1.0):
    """[scale * a, column] along the last axis (column broadcast to a's rows)."""
    out = np.empty(a.shape[:-1] + (a.shape[-1] + 1,), dtype=a.dtype)
    np.multiply(a, scale, out=out[..., :-1])
    out[..., -1] = column
    return out


# -- the keys-major crossover, measured once per process --------------------------------------------------
_KEYS_MAJOR: list[int] = []  # [the measured limit], once
_KEYS_MAJOR_LOCK = threading.Lock()
_MEASURED_KEYS = (16, 32, 64, 128, 256)


def keys_major_limit() -> int:
    """The longest key count S (of those measured) up to which the whole-problem forward runs faster with
    keys-major scores on this machine: measured at first use on causal float32 problems of 2^16 scores, S x S
    per head, E = 32, both layouts alternating, best of 5 each after a warm-up; the largest S where keys-major
    wins by 5% (0 when it never does: a loss at a short S is not taken as the end, since on a busy machine one
    timing may lose by chance and short rows are where keys-major gains most); cached for the process."""
    with _KEYS_MAJOR_LOCK:
        if not _KEYS_MAJOR:
            _KEYS_MAJOR.append(_measure_keys_major())
        return _KEYS_MAJOR[0]


def _measure_keys_major() -> int:
    rng = np.random.default_rng(0)
    limit = 0
    for n in _MEASURED_KEYS:
        q, k, v = (rng.standard_normal((max(1, (1 << 16) // (n * n)), 1, n, 32), dtype=np.float32) for _ in "qkv")
        pb = _Problem(q, k, v, None, scale=0.2, causal_offset=0, lengths=None, dropout_p=0.0, seed=0, enable_gqa=False)
        qg, kg, vg = pb.whole_operands()
        runs = {True: (vg, pb.whole_hide(True)), False: (_augmented(vg, 1), pb.whole_hide(False))}
        keys_major, rows_major = runtime.best_seconds(
            [
                functools.partial(
                    _forward_block,
                    qg,
                    kg,
                    v_ext,
                    hide,
                    None,
                    scale=0.2,
                    units=BASE_2,
                    dropout_p=0.0,
                    may_empty=True,
                    keys_major=km,
                )
                for km, (v_ext, hide) in runs.items()
            ],
            reps=5,
            warmup=1,
        )
        if keys_major < 0.95 * rows_major:
            limit = n
    return limit


# -- the passes -------------------------------------------------------------------------------------------
def attention_forward(q, k, v, mask=None, **problem):
    """Output, row_max and row_log_sum (lse = row_max + row_log_sum; 0 and 0 on rows that see no key).
    ``problem``: ``_Problem``'s keywords (``scale``, ``causal_offset``, ``lengths``, ``dropout_p``, ``seed``,
    ``enable_gqa``: what ops/attention.py's ``_options`` gives)."""
    pb = _Problem(q, k, v, mask, **problem)
    scale, dropout_p = pb.scale, pb.dropout_p
    lay = pb.lay
    # the bound costs two passes over q and k: tiled problems only (the whole problem's row max is cheap there)
    shift = pb.whole or pb.float_mask or not _bounded(pb.q, pb.k, pb.v, scale)
    options = dict(scale=scale, units=pb.units, dropout_p=dropout_p, may_empty=pb.may_empty, shift=shift)
    if pb.whole:
        qg, kg, vg = pb.whole_operands()
        keys_major = lay.S <= (pb.tune.keys_major_keys if pb.tune.keys_major_keys is not None else keys_major_limit())
        keep = pb.whole_keep(keys_major) if dropout_p else None
        v_ext = vg if dropout_p or keys_major else _augmented(vg, 1)
        # the output laid out (..., L, heads, Ev): merging the heads back ((B, L, H * Ev), what attention layers
        # do next) is then a view, not a copy
        out = buffers.empty(lay.batch_shape + (lay.L, lay.heads, lay.Ev), q.dtype).swapaxes(-2, -3)
        out, row_max, row_log_sum = _forward_block(
            qg, kg, v_ext, pb.whole_hide(keys_major), keep, keys_major=keys_major, out=out, **options
        )
        return out.reshape(lay.out_shape), row_max, row_log_sum

    out = _zeros(lay.batch_shape + (lay.heads, lay.L, lay.Ev), q.dtype)
    row_max = _zeros(lay.batch_shape + (lay.heads, lay.L), q.dtype)
    row_log_sum = _zeros(lay.batch_shape + (lay.heads, lay.L), q.dtype)
    for batch in pb.batches:
        pb.setup(batch, fused=not dropout_p)

    scratch = buffers.Scratch()  # this call's: kept longer, the score tiles sat under the backward's peak

    def tile_forward(worker, tile):
        batch, groups, rows, keys = tile.batch, slice(tile.g0, tile.g1), slice(tile.i0, tile.i1), slice(0, tile.j1)
        heads = slice(tile.h0, tile.h1)
        _, m, log_l = _forward_block(
            batch.q[groups, :, rows],
            batch.kg[groups, keys],
            (batch.vg if dropout_p else batch.v_ones)[groups, keys],
            pb.tile_hide(tile),
            pb.keep(tile) if dropout_p else None,
            out=out[batch.index][heads, rows],
            take=scratch,
            **options,
        )
        row_max[batch.index][heads, rows] = m
        row_log_sum[batch.index][heads, rows] = log_l

    runtime.run(pb.tiles, tile_forward, pb.tune.workers)
    return out.reshape(lay.out_shape), row_max, row_log_sum


def attention_backward(g, out, q, k, v, mask=None, *, row_max, row_log_sum, needs=(True, True, True, True), **problem):
    """(dq, dk, dv, dmask) for the output gradient g; None where ``needs`` is False. ``problem``: the forward's
    (``attention_forward``)."""
    pb = _Problem(q, k, v, mask, backward=True, **problem)
    scale, dropout_p = pb.scale, pb.dropout_p
    lay = pb.lay
    need_q, need_k, need_v, need_mask = needs
    need_mask = need_mask and pb.float_mask
    full = lay.batch_shape + (lay.heads, lay.L, lay.Ev)
    g = g.reshape(full)
    out = out.reshape(full)
    options = dict(scale=scale, units=pb.units, dropout_p=dropout_p, needs=(need_q, need_k, need_v))
    if pb.whole:
        grads = _whole_backward(pb, g, out, row_max, row_log_sum, need_mask, options)
    else:
        grads = _tiled_backward(pb, g, out, row_max, row_log_sum, need_mask, options)
    return tuple(None if grad is None else grad.reshape(a.shape) for grad, a in zip(grads, (q, k, v, mask)))


def _whole_backward(pb, g, out, row_max, row_log_sum, need_mask, options):
    """The backward as one block over every batch element and head; gradients summed to the inputs' shapes."""
    lay = pb.lay
    grouped = lay.batch_shape + (lay.kv_groups, lay.group_size, lay.L)
    # no ones columns here: at these sizes the separate subtractions cost less than the wider matmuls
    qg, kg, vg = pb.whole_operands()
    delta = np.einsum("...d,...d->...", g, out)  # D = rowsum(dO * O)
    dq, dk, dv, ds = _backward_block(
        qg,
        kg,
        vg,
        g.reshape(grouped + (lay.Ev,)),
        row_max.reshape(grouped),
        row_log_sum.reshape(grouped),
        delta.reshape(grouped),
        pb.whole_hide(),
        pb.whole_keep() if pb.dropout_p else None,
        **options,
    )
    if dq is not None:
        dq = _sum_to(dq, pb.q.shape)
    if dk is not None:
        dk = _sum_to(_sum_heads(dk, pb.k.shape[-3]), pb.k.shape)
    if dv is not None:
        dv = _sum_to(_sum_heads(dv, pb.v.shape[-3]), pb.v.shape)
    return dq, dk, dv, _sum_to(ds, pb.mask.shape) if need_mask else None


def _tiled_backward(pb, g, out, row_max, row_log_sum, need_mask, options):
    """The backward tile by tile on the worker pool, each tile adding into the gradients of its rows / keys."""
    lay = pb.lay
    fused = not pb.float_mask and not pb.dropout_p  # lse and D ride along in the matmuls as an extra column
    H, L, KG, G = lay.heads, lay.L, lay.kv_groups, lay.group_size
    need_q, need_k, need_v = options["needs"]
    for batch in pb.batches:
        pb.setup(batch, fused)
        delta = np.einsum("hld,hld->hl", g[batch.index], out[batch.index])  # D = rowsum(dO * O)
        batch.go = g[batch.index].reshape(KG, G, L, lay.Ev)
        batch.lse_parts = (row_max[batch.index].reshape(KG, G, L), row_log_sum[batch.index].reshape(KG, G, L))
        batch.delta = delta.reshape(KG, G, L)
    shapes = (
        pb.q.shape if need_q else None,
        pb.k.shape if need_k else None,
        pb.v.shape if need_v else None,
        pb.mask.shape if need_mask else None,
    )
    dq, dk, dv, dmask = (None if shape is None else _zeros(shape, pb.q.dtype) for shape in shapes)
    locks = [threading.Lock() for _ in range(4)]  # tiles of different workers may add into the same rows

    scratch = buffers.Scratch()

    def tile_backward(worker, tile):
        batch, groups, rows, keys = (
            tile.batch,
            slice(tile.g0, tile.g1),
            slice(tile.i0, tile.i1),
            slice(tile.j0, tile.j1),
        )
        m, log_l = (part[groups, :, rows] for part in batch.lse_parts)
        dq_blk, dk_blk, dv_blk, ds = _backward_block(
            batch.q[groups, :, rows],
            batch.kg[groups, keys],
            batch.vg[groups, keys],
            batch.go[groups, :, rows],
            m,
            log_l,
            batch.delta[groups, :, rows],
            pb.tile_hide(tile),
            pb.keep(tile) if pb.dropout_p else None,
            k_ones=batch.k_ones[groups, keys] if fused else None,
            v_ones=batch.v_ones[groups, keys] if fused else None,
            take=scratch,
            **options,
        )
        if dv_blk is not None:
            _add_heads(dv, tile, dv_blk, lay, locks[2])
        if dmask is not None:
            _accumulate_mask_grad(dmask[_own_index(dmask.shape[:-3], batch.index)], ds, tile, locks[3])
        if dq_blk is not None and dq is not None:  # dq_blk is computed only where dq is needed (allocated)
            dq_b = dq[_own_index(dq.shape[:-3], batch.index)]
            heads_of_q = slice(tile.h0, tile.h1) if dq_b.shape[0] == H else slice(None)
            if dq_b.shape[0] != H:
                dq_blk = dq_blk.sum(axis=0, keepdims=True)
            with locks[0]:
                dq_b[heads_of_q, rows] += dq_blk
        if dk_blk is not None:
            _add_heads(dk, tile, dk_blk, lay, locks[1])

    runtime.run(pb.tiles, tile_backward, pb.tune.workers)
    return dq, dk, dv, dmask


def _add_heads(grad, tile, grouped, lay, lock):
    """Add a tile's (groups, keys, d) K or V gradient into that input's own heads of the batch element."""
    own = grad[_own_index(grad.shape[:-3], tile.batch.index)]
    with lock:
        if own.shape[0] == lay.kv_groups:
            own[tile.g0 : tile.g1, tile.j0 : tile.j1] += grouped
            return
        owners = _group_owner(own.shape[0], lay)  # several groups share one head: the _heads copies
        for g in range(tile.g0, tile.g1):
            own[owners[g], tile.j0 : tile.j1] += grouped[g - tile.g0]


def _accumulate_mask_grad(dmask_b, ds3, tile, lock):
    """Add dS (heads, rows, keys) into one batch element's mask gradient, summed over broadcast dims."""
    grad = _sum_to(ds3, dmask_b.shape)
    with lock:
        dmask_b[
            slice(tile.h0, tile.h1) if dmask_b.shape[0] > 1 else slice(None),
            slice(tile.i0, tile.i1) if dmask_b.shape[1] > 1 else slice(None),
            slice(tile.j0, tile.j1) if dmask_b.shape[2] > 1 else slice(None),
        ] += grad
