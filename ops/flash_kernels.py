"""Tiled numpy kernels for scaled dot-product attention (FlashAttention-2 style, Dao 2023).

A tile is a block of query rows of a few heads of one batch element. In the forward it takes every key
the block can see at once -- the prefix ``[0, kmax)`` left by the causal limit and the key-padding
length -- so its softmax is exact with a plain row max; keys past ``kmax`` (above the causal diagonal,
past a padding length) are never touched. The query heads of a GQA group are stacked as extra rows
against their one K/V head, so the group's dK/dV contributions are summed by the matmul itself.

The forward keeps the output and the row log-sum-exp as its two terms ``row_max`` (m) and
``row_log_sum`` (log l), lse = m + log l: kept apart, a row whose scores are all a large finite fill
(-1e9) still recomputes P = exp((S - m) - log l) = 1/S exactly in float32, where exp(S - lse) would
round to 1. The backward never stores P: with the lse known, P = exp(S - lse) of any tile is exact on
its own, so backward tiles also split the keys; D = rowsum(dO * O), dS = P * (dP - D). Without a float
mask, lse (resp. D) rides along in the score (resp. dP) matmul as one extra column:
[q*scale, -lse] @ [k, 1]^T = S - lse.

Dropout masks come from a counter-based generator (Philox) addressed by (seed, head, query row, key),
so the backward regenerates exactly the forward's mask, whatever the tiling. Tiles run on a small
thread pool with numpy's BLAS made single-threaded meanwhile (see ``_run``).
See docs/attention.md for the derivation.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

__all__ = ["WORKERS", "BLOCK_ROWS", "BLOCK_KEYS", "TILE_ELEMENTS", "MIN_ROWS", "Layout", "layout", "attention_forward",
           "attention_backward", "dropout_keep_mask"]

WORKERS = None
"""Threads that run blocks; None = the CPUs this process may use. 1 runs the blocks in order."""
BLOCK_ROWS = None
"""Query rows per tile; None picks them from TILE_ELEMENTS (at least MIN_ROWS)."""
BLOCK_KEYS = None
"""Keys per backward tile (the forward takes all visible keys at once); None picks them from TILE_ELEMENTS."""
TILE_ELEMENTS = 1 << 17
"""Scores per tile the automatic choices aim at (one float32 tile: 512 KiB)."""
MIN_ROWS = 128


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
    group = math.gcd(heads // hk, heads // hv)
    L, E = qs[-2:]
    S, Ev = vs[-2], vs[-1]
    out_rank = max(q.ndim, k.ndim, v.ndim)
    full = batch_shape + (heads, L, Ev)
    return Layout(batch_shape, heads, heads // group, group, L, S, E, Ev, full[len(full) - out_rank:])


def _promoted_shape(shape, rank):
    return (1,) * (rank - len(shape)) + tuple(shape)


def _promote(a, rank):
    return a.reshape(_promoted_shape(a.shape, rank))


def _own_index(shape, index):
    """The index into an array broadcast over ``index``'s dims (size-1 dims stay at 0)."""
    return tuple(i if n > 1 else 0 for n, i in zip(shape, index))


def _group_owner(n_heads, lay: Layout):
    """For each K/V group, which of an input's n_heads heads it uses (h // (H / n) for its first query head)."""
    return np.arange(lay.kv_groups) * lay.group_size // (lay.heads // n_heads)


def _heads(a, lay: Layout):
    """a's heads (n, S, d) as (kv_groups, S, d): a view, or a copy when heads must repeat (only when K and V
    have different head counts, or one of them is broadcast over heads and the other is not)."""
    return a if a.shape[0] == lay.kv_groups else a[_group_owner(a.shape[0], lay)]


def _row_blocks(L, n_keys, causal_offset, rows):
    """(i0, i1, kmax, c0) per block of query rows: keys [0, kmax) are visible to some row of the block,
    keys [0, c0) to every row (causal); blocks that see no key are skipped."""
    for i0 in range(0, L, rows):
        i1 = min(L, i0 + rows)
        kmax, c0 = n_keys, n_keys
        if causal_offset is not None:
            kmax = min(n_keys, i1 + causal_offset)
            c0 = max(0, min(kmax, i0 + causal_offset + 1))
        if kmax > 0:
            yield i0, i1, kmax, c0


def _tile_shape(lay: Layout, n_keys):
    """(query rows per block, K/V groups per tile): rows from BLOCK_ROWS or so that one head's tile holds
    about TILE_ELEMENTS / 4 scores (at least MIN_ROWS, for matmuls that run well), then as many groups as
    fit TILE_ELEMENTS."""
    keys = max(1, min(lay.S, n_keys))
    rows = BLOCK_ROWS or min(lay.L, max(MIN_ROWS, TILE_ELEMENTS // (4 * keys * lay.group_size)))
    groups = max(1, min(lay.kv_groups, TILE_ELEMENTS // (rows * keys * lay.group_size)))
    return rows, groups


@dataclass(frozen=True)
class _Tile:
    """One work item: K/V groups [g0, g1) (query heads [h0, h1)) of one batch element, query rows
    [i0, i1), keys [j0, j1); keys [0, c0) are visible to every row of the block (causal)."""

    batch: _Batch
    g0: int
    g1: int
    h0: int
    h1: int
    i0: int
    i1: int
    j0: int
    j1: int
    c0: int


def _blocked_diagonal(tile, causal_offset):
    """True above the causal diagonal: key j hidden from query i when j > i + offset."""
    return np.arange(max(tile.c0, tile.j0), tile.j1)[None, :] > (np.arange(tile.i0, tile.i1) + causal_offset)[:, None]


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
    (i0, i1), (j0, j1) = rows, keys
    row_stride = -(-S // 4) * 4  # Philox yields 4 draws per counter step: rows start on a step
    start = (head_index * L + i0) * row_stride
    draws = np.random.Philox(counter=start // 4, key=seed).random_raw((i1 - i0) * row_stride)
    threshold = np.uint64(min(int(p * 2.0**64), 2**64 - 1))
    return draws.reshape(i1 - i0, row_stride)[:, j0:j1] >= threshold


# -- the passes -------------------------------------------------------------------------------------------
class _Batch:
    """One batch element: its index, visible key count, mask slice, and (after setup) grouped operands."""

    def __init__(self, flat, index, n_keys, mask):
        self.flat, self.index, self.n_keys, self.mask = flat, index, n_keys, mask


class _Problem:
    """Inputs promoted to one rank, one ``_Batch`` per batch element, and the list of tiles."""

    def __init__(self, q, k, v, mask, *, scale, causal_offset, lengths, dropout_p, seed, enable_gqa,
                 split_keys=False):
        self.lay = lay = layout(q, k, v, enable_gqa)
        rank = len(lay.batch_shape) + 3
        self.q, self.k, self.v = (_promote(a, rank) for a in (q, k, v))
        self.mask = None if mask is None else _promote(mask, rank)
        self.mask_is_bool = mask is not None and mask.dtype == np.bool_
        self.float_mask = mask is not None and not self.mask_is_bool
        self.scale, self.causal_offset, self.dropout_p, self.seed = scale, causal_offset, dropout_p, seed
        lengths = None if lengths is None else np.broadcast_to(lengths, lay.batch_shape)
        hidden = ~self.mask if self.mask_is_bool else self.mask  # bool masks are applied as "hidden" flags
        G = lay.group_size
        self.batches, self.tiles = [], []
        for flat, b in enumerate(np.ndindex(*lay.batch_shape)):
            n_keys = lay.S if lengths is None else int(lengths[b])
            batch = _Batch(flat, b, n_keys, None if hidden is None else hidden[_own_index(hidden.shape[:-3], b)])
            self.batches.append(batch)
            rows, groups = _tile_shape(lay, n_keys)
            chunk = (BLOCK_KEYS or max(MIN_ROWS, TILE_ELEMENTS // (rows * G))) if split_keys else lay.S
            for i0, i1, kmax, c0 in _row_blocks(lay.L, n_keys, causal_offset, rows):
                for g0 in range(0, lay.kv_groups, groups):
                    g1 = min(lay.kv_groups, g0 + groups)
                    for j0 in range(0, kmax, chunk):
                        self.tiles.append(_Tile(batch, g0, g1, g0 * G, g1 * G, i0, i1, j0, min(kmax, j0 + chunk), c0))
        # largest tiles first, so that the threads run out of work together
        self.tiles.sort(key=lambda tile: (tile.i0 - tile.i1) * (tile.j1 - tile.j0))

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

    def mask_scores(self, s3, tile):
        """Add a float mask, put -inf where a bool mask or the causal limit hides a key (s3: heads, rows, keys)."""
        if tile.batch.mask is not None:
            if self.mask_is_bool:
                np.copyto(s3, -np.inf, where=_mask_tile(tile.batch.mask, tile))
            else:
                s3 += _mask_tile(tile.batch.mask, tile)
        start = max(tile.c0, tile.j0)
        if self.causal_offset is not None and start < tile.j1:
            np.copyto(s3[..., start - tile.j0:], -np.inf, where=_blocked_diagonal(tile, self.causal_offset))

    def keep(self, tile):
        """The dropout keep flags of a tile, (heads, rows, keys)."""
        lay = self.lay
        keep = np.empty((tile.h1 - tile.h0, tile.i1 - tile.i0, tile.j1 - tile.j0), dtype=bool)
        for h in range(tile.h0, tile.h1):
            keep[h - tile.h0] = dropout_keep_mask(self.seed, tile.batch.flat * lay.heads + h, (tile.i0, tile.i1),
                                                  (tile.j0, tile.j1), lay.L, lay.S, self.dropout_p)
        return keep


def _augmented(a, column, scale=1.0):
    """[scale * a, column] along the last axis (column broadcast to a's rows)."""
    out = np.empty(a.shape[:-1] + (a.shape[-1] + 1,), dtype=a.dtype)
    np.multiply(a, scale, out=out[..., :-1])
    out[..., -1] = column
    return out


def attention_forward(q, k, v, mask=None, *, scale, causal_offset=None, lengths=None, dropout_p=0.0,
                      seed=0, enable_gqa=False):
    """Output, row_max and row_log_sum (lse = row_max + row_log_sum; 0 and 0 on rows that see no key)."""
    pb = _Problem(q, k, v, mask, scale=scale, causal_offset=causal_offset, lengths=lengths, dropout_p=dropout_p,
                  seed=seed, enable_gqa=enable_gqa)
    lay = pb.lay
    E, Ev = lay.E, lay.Ev
    out = np.zeros(lay.batch_shape + (lay.heads, lay.L, Ev), q.dtype)
    row_max = np.zeros(lay.batch_shape + (lay.heads, lay.L), q.dtype)
    row_log_sum = np.zeros(lay.batch_shape + (lay.heads, lay.L), q.dtype)
    may_empty = mask is not None or causal_offset is not None
    for batch in pb.batches:
        pb.setup(batch, fused=not dropout_p)

    def tile_forward(worker, tile):
        batch, groups, i0, i1, kmax = tile.batch, slice(tile.g0, tile.g1), tile.i0, tile.i1, tile.j1
        heads, t = tile.h1 - tile.h0, i1 - i0
        q_blk = np.multiply(batch.q[groups, :, i0:i1], scale, dtype=q.dtype).reshape(tile.g1 - tile.g0, -1, E)
        s = np.matmul(q_blk, batch.kg[groups, :kmax].swapaxes(-1, -2))
        s3 = s.reshape(heads, t, kmax)
        pb.mask_scores(s3, tile)
        m = s3.max(axis=-1, keepdims=True)
        if may_empty:
            m[np.isneginf(m)] = 0
        s3 -= m
        np.exp(s3, out=s3)
        if dropout_p:
            row_sum = s3.sum(axis=-1, keepdims=True)
            s3 *= pb.keep(tile)
            o = np.matmul(s, batch.vg[groups, :kmax]).reshape(heads, t, Ev)
            denominator = row_sum * (1 - dropout_p)
        else:  # P @ [V, 1] gives the unnormalised output and the row sums in one product
            ol = np.matmul(s, batch.v_ones[groups, :kmax]).reshape(heads, t, Ev + 1)
            o, row_sum = ol[..., :Ev], ol[..., Ev:]
            denominator = row_sum
        if may_empty:
            empty = row_sum == 0
            if empty.any():
                denominator = np.where(empty, 1, denominator)
                row_sum = np.where(empty, 1, row_sum)
        np.divide(o, denominator, out=out[batch.index][tile.h0:tile.h1, i0:i1])
        row_max[batch.index][tile.h0:tile.h1, i0:i1] = m[..., 0]
        row_log_sum[batch.index][tile.h0:tile.h1, i0:i1] = np.log(row_sum[..., 0])

    _run(pb.tiles, tile_forward)
    return out.reshape(lay.out_shape), row_max, row_log_sum


def attention_backward(g, out, q, k, v, mask=None, *, row_max, row_log_sum, needs=(True, True, True, True),
                       scale, causal_offset=None, lengths=None, dropout_p=0.0, seed=0, enable_gqa=False):
    """(dq, dk, dv, dmask) for the output gradient g; None where ``needs`` is False."""
    pb = _Problem(q, k, v, mask, scale=scale, causal_offset=causal_offset, lengths=lengths, dropout_p=dropout_p,
                  seed=seed, enable_gqa=enable_gqa, split_keys=True)
    lay = pb.lay
    dtype = q.dtype
    H, L, E, Ev, KG, G = lay.heads, lay.L, lay.E, lay.Ev, lay.kv_groups, lay.group_size
    need_q, need_k, need_v, need_mask = needs
    need_mask = need_mask and pb.float_mask
    fused = not pb.float_mask and not dropout_p  # lse and D ride along in the matmuls as an extra column
    full = lay.batch_shape + (H, L)
    g = g.reshape(full + (Ev,))
    out = out.reshape(full + (Ev,))
    keep_scale = 1 / (1 - dropout_p)
    for batch in pb.batches:
        pb.setup(batch, fused)
        delta = np.einsum("hld,hld->hl", g[batch.index], out[batch.index])  # D = rowsum(dO * O)
        batch.go = g[batch.index].reshape(KG, G, L, Ev)
        batch.lse_parts = (row_max[batch.index].reshape(KG, G, L), row_log_sum[batch.index].reshape(KG, G, L))
        batch.delta = delta.reshape(KG, G, L)
    shapes = (pb.q.shape if need_q else None, pb.k.shape if need_k else None, pb.v.shape if need_v else None,
              pb.mask.shape if need_mask else None)
    dq, dk, dv, dmask = (None if shape is None else np.zeros(shape, dtype) for shape in shapes)
    locks = [threading.Lock() for _ in range(4)]  # tiles of different workers may add into the same rows

    def tile_backward(worker, tile):
        batch, groups, i0, i1 = tile.batch, slice(tile.g0, tile.g1), tile.i0, tile.i1
        keys, n_keys = slice(tile.j0, tile.j1), tile.j1 - tile.j0
        heads, t = tile.h1 - tile.h0, i1 - i0
        rows = (tile.g1 - tile.g0, G * t)
        m, log_l = (part[groups, :, i0:i1] for part in batch.lse_parts)
        go = batch.go[groups, :, i0:i1].reshape(*rows, Ev)
        if fused:  # [q*scale, -lse] @ [k, 1]^T = S - lse
            q_blk = _augmented(batch.q[groups, :, i0:i1], -(m + log_l), scale).reshape(*rows, E + 1)
            p = np.matmul(q_blk, batch.k_ones[groups, keys].swapaxes(-1, -2))
            q_blk = q_blk[..., :E]
        else:
            q_blk = np.multiply(batch.q[groups, :, i0:i1], scale, dtype=dtype).reshape(*rows, E)
            p = np.matmul(q_blk, batch.kg[groups, keys].swapaxes(-1, -2))
        p3 = p.reshape(heads, t, n_keys)
        pb.mask_scores(p3, tile)
        if not fused:  # (S - m) - log l: exact even when a finite fill makes S and m huge
            p3 -= m.reshape(heads, t, 1)
            p3 -= log_l.reshape(heads, t, 1)
        np.exp(p3, out=p3)
        if dropout_p:
            keep = pb.keep(tile)
            if dv is not None:
                dropped = np.multiply(p3, keep, dtype=dtype)
                dropped *= keep_scale
                _add_heads(dv, tile, np.matmul(dropped.reshape(*rows, n_keys).swapaxes(-1, -2), go), lay, locks[2])
                del dropped
            ds = np.matmul(go, batch.vg[groups, keys].swapaxes(-1, -2))
            ds3 = ds.reshape(heads, t, n_keys)
            ds3 *= keep
            ds3 *= keep_scale
            ds3 -= batch.delta[groups, :, i0:i1].reshape(heads, t, 1)
        else:
            if dv is not None:
                _add_heads(dv, tile, np.matmul(p.swapaxes(-1, -2), go), lay, locks[2])
            if fused:  # [dO, -D] @ [V, 1]^T = dP - D
                go_aug = _augmented(go, -batch.delta[groups, :, i0:i1].reshape(rows))
                ds = np.matmul(go_aug, batch.v_ones[groups, keys].swapaxes(-1, -2))
            else:
                ds = np.matmul(go, batch.vg[groups, keys].swapaxes(-1, -2))
                ds -= batch.delta[groups, :, i0:i1].reshape(*rows, 1)
        ds *= p  # dS = P * (dP - D)
        if dmask is not None:
            _accumulate_mask_grad(dmask[_own_index(dmask.shape[:-3], batch.index)], ds.reshape(heads, t, n_keys), tile,
                                  locks[3])
        if dq is not None:
            dq_blk = np.matmul(ds, batch.kg[groups, keys]).reshape(heads, t, E)
            dq_blk *= scale
            dq_b = dq[_own_index(dq.shape[:-3], batch.index)]
            heads_of_q = slice(tile.h0, tile.h1) if dq_b.shape[0] == H else slice(None)
            if dq_b.shape[0] != H:
                dq_blk = dq_blk.sum(axis=0, keepdims=True)
            with locks[0]:
                dq_b[heads_of_q, i0:i1] += dq_blk
        if dk is not None:  # dK = scale * dS^T Q = dS^T (scale * Q)
            _add_heads(dk, tile, np.matmul(ds.swapaxes(-1, -2), q_blk), lay, locks[1])

    _run(pb.tiles, tile_backward)
    return (None if dq is None else dq.reshape(q.shape), None if dk is None else dk.reshape(k.shape),
            None if dv is None else dv.reshape(v.shape), None if dmask is None else dmask.reshape(mask.shape))


def _add_heads(grad, tile, grouped, lay, lock):
    """Add a tile's (groups, keys, d) K or V gradient into that input's own heads of the batch element."""
    own = grad[_own_index(grad.shape[:-3], tile.batch.index)]
    with lock:
        if own.shape[0] == lay.kv_groups:
            own[tile.g0:tile.g1, tile.j0:tile.j1] += grouped
            return
        owners = _group_owner(own.shape[0], lay)  # several groups share one head: the _heads copies
        for g in range(tile.g0, tile.g1):
            own[owners[g], tile.j0:tile.j1] += grouped[g - tile.g0]


def _accumulate_mask_grad(dmask_b, ds3, tile, lock):
    """Add dS (heads, rows, keys) into one batch element's mask gradient, summed over broadcast dims."""
    grad = ds3
    for axis in range(3):
        if dmask_b.shape[axis] == 1:
            grad = grad.sum(axis=axis, keepdims=True)
    with lock:
        dmask_b[slice(tile.h0, tile.h1) if dmask_b.shape[0] > 1 else slice(None),
                slice(tile.i0, tile.i1) if dmask_b.shape[1] > 1 else slice(None),
                slice(tile.j0, tile.j1) if dmask_b.shape[2] > 1 else slice(None)] += grad


# -- running blocks on threads ----------------------------------------------------------------------------
def _run(items, work):
    """Call work(worker, item) for every item, on WORKERS threads taking items as they free up.

    numpy releases the GIL inside BLAS calls and ufuncs, so the threads run both on their own core;
    BLAS is made single-threaded meanwhile (its own per-call threading is what we replace: on a busy
    machine it waits on descheduled threads). Without a BLAS we can switch, the blocks run in order.
    """
    workers = min(WORKERS or _cpu_count(), len(items))
    blas = _blas_threads() if workers > 1 else None
    if blas is None:
        for item in items:
            work(0, item)
        return
    queue = iter(items)
    lock = threading.Lock()

    def loop(worker):
        while True:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            work(worker, item)

    with blas:
        futures = [_pool(workers).submit(loop, w) for w in range(workers)]
        for f in futures:
            f.result()


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool(workers):
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minitape-attention")
        return _POOL


class _SingleThreadedBlas:
    """Context manager: numpy's OpenBLAS runs single-threaded inside, its thread count is restored after
    (nested and concurrent uses are counted, the last one out restores)."""

    def __init__(self, get_threads, set_threads):
        self.get_threads, self.set_threads = get_threads, set_threads
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = 1

    def __enter__(self):
        with self.lock:
            if self.depth == 0:
                self.saved = self.get_threads()
                self.set_threads(1)
            self.depth += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self.set_threads(self.saved)
        return False


_BLAS = []  # [the _SingleThreadedBlas for the loaded OpenBLAS, or None], looked up once


def _blas_threads():
    """The loaded OpenBLAS's thread switch (found in /proc/self/maps), or None where there is none."""
    if not _BLAS:
        _BLAS.append(_find_openblas())
    return _BLAS[0]


def _find_openblas():
    import ctypes
    import re

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps.read())))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    get.restype = ctypes.c_int
                    set_.argtypes = [ctypes.c_int]
                    return _SingleThreadedBlas(get, set_)
    return None
