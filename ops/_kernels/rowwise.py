"""Row kernels of softmax / log_softmax, cross_entropy and layer_norm / rms_norm (ops/normalization.py,
ops/loss.py): every one works over the last axis of arrays that the caller views with that axis last
(``along_last``), writing into buffers the caller owns (``owned_like``). ``blockwise`` runs such a kernel over
blocks of whole rows of about ``BLOCK_ELEMENTS`` elements (cache-sized, on the worker pool when there are
several; per-block results in block order, so every result is the same from run to run). ``flat_blockwise``
runs multi-pass elementwise kernels (gelu's, ops/elementwise.py) the same way over blocks of flat arrays, with
each thread's temporaries from a ``buffers.Scratch``. ``row_sums`` / ``row_dots`` are the row reductions
(einsums). Why blocks, and why einsum: docs/kernels.md.
"""

import functools

import numpy as np

from . import buffers, runtime

__all__ = [
    "BLOCK_ELEMENTS",
    "flat_blockwise",
    "flat_block_elements",
    "owned_like",
    "along_last",
    "from_last",
    "blockwise",
    "row_sums",
    "row_dots",
    "subtract_row_max",
    "exp_into",
    "short_row_length",
    "softmax_block",
    "log_softmax_block",
    "softmax_grad_block",
    "log_softmax_grad_block",
    "normalize_block",
    "normalize_grad_block",
    "exp_shifted_block",
    "cross_entropy_grad_block",
]

BLOCK_ELEMENTS = 1 << 18  # 1 MiB of float32 per array: a block stays in (L2 or L3) cache between its passes


def owned_like(a: np.ndarray) -> np.ndarray:
    """An uninitialised array of ``a``'s shape and dtype for a kernel to fill completely: a reused one of
    ``buffers.empty`` (no fresh pages to fault in every step) when ``a`` is C-contiguous, else ``np.empty_like``
    (which keeps ``a``'s memory layout, so rows the kernel walks stay contiguous)."""
    return buffers.empty(a.shape, a.dtype) if a.flags.c_contiguous else np.empty_like(a)


def along_last(a, axis: int):
    """``a`` with ``axis`` moved last (a view; ``a`` itself when it is already last)."""
    return a if axis == a.ndim - 1 else np.moveaxis(a, axis, -1)


def from_last(a, axis: int):
    """Undo ``along_last``: the last axis of ``a`` moved back to ``axis`` (a view; ``a`` itself when it is last)."""
    return a if axis == a.ndim - 1 else np.moveaxis(a, -1, axis)


def blockwise(kernel, *arrays) -> list:
    """``kernel(*blocks)`` for consecutive blocks of rows (slices of the first axis, the same for every array;
    None stays None) of about BLOCK_ELEMENTS elements of the first array, on the worker pool when there are
    several. 1-D arrays (one row) are one block. Returns the kernel's results in block order."""
    lead = arrays[0]
    if lead.ndim < 2 or lead.size <= BLOCK_ELEMENTS:
        return [kernel(*arrays)]
    step = max(1, BLOCK_ELEMENTS // (lead.size // lead.shape[0]))
    blocks = [slice(start, start + step) for start in range(0, lead.shape[0], step)]
    results: list = [None] * len(blocks)

    def work(worker, k):
        results[k] = kernel(*(None if a is None else a[blocks[k]] for a in arrays))

    runtime.run(list(range(len(blocks))), work)
    return results


def flat_blockwise(kernel, scratch: tuple, *arrays) -> None:
    """``kernel(*blocks, *scratch_blocks)`` over consecutive blocks of ``flat_block_elements()`` elements of the
    equal-sized 1-D ``arrays`` (inputs and the outputs the caller owns), so that the many in-place passes of an
    elementwise kernel read and write a block in L1/L2 cache rather than memory. ``scratch`` is the dtypes of
    the kernel's temporaries: each thread's arrays of one ``buffers.Scratch``, reused for all its blocks. The blocks
    go to the worker pool when there are at least ``POOL_BLOCKS`` of them (below, the hand-off costs more
    than the second thread gains, and a busy machine may deschedule it); every element's arithmetic is the
    same whichever block and thread computes it."""
    size, step = arrays[0].size, flat_block_elements()
    starts = list(range(0, size, step))
    temporaries = buffers.Scratch()

    def work(worker, start):
        stop = min(start + step, size)
        blocks = (temporaries(str(i), (stop - start,), dtype) for i, dtype in enumerate(scratch))
        kernel(*(a[start:stop] for a in arrays), *blocks)

    if len(starts) < POOL_BLOCKS:
        for start in starts:
            work(0, start)
    else:
        runtime.run(starts, work)


POOL_BLOCKS = 4
_FLAT_BLOCK: list[int] = []  # [the measured block size], once per process
_FLAT_SIZES = (1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18)


def flat_block_elements() -> int:
    """The block size of ``flat_blockwise``: measured at first use on this CPU (its cache sizes decide) as the
    fastest of a few sizes at an eight-pass in-place float32 kernel over 2^20 elements (best of 3 runs each)."""
    if not _FLAT_BLOCK:
        data = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
        scratch = np.empty_like(data)

        def passes(block):
            for start in range(0, data.size, block):
                x, t = data[start : start + block], scratch[: min(block, data.size - start)]
                np.abs(x, out=t)
                for _ in range(3):
                    t += np.float32(1)
                    t *= np.float32(-0.5)
                np.exp2(t, out=t)

        seconds = runtime.best_seconds([functools.partial(passes, block) for block in _FLAT_SIZES], reps=3)
        _FLAT_BLOCK.append(_FLAT_SIZES[seconds.index(min(seconds))])
    return _FLAT_BLOCK[0]


def row_sums(a):
    """The sum of each row (over the last axis), kept as a size-1 axis."""
    return np.einsum("...i->...", a)[..., None]


def row_dots(a, b):
    """sum(a * b) over each row (the last axis), kept as a size-1 axis, without the a * b temporary."""
    return np.einsum("...i,...i->...", a, b)[..., None]


def subtract_row_max(x: np.ndarray, out: np.ndarray, row_max: np.ndarray | None = None) -> np.ndarray:
    """``out = x - max(x)`` over each row (every exp of it is at most 1, so nothing overflows); returns the max
    (kept as a size-1 axis; written into ``row_max`` when given). A row whose max is +inf or -inf (all -inf)
    becomes NaN without a warning, as in torch."""
    if row_max is None:
        row_max = np.empty(x.shape[:-1] + (1,), x.dtype)
    if x.ndim >= 2 and 0 < x.shape[-1] <= short_row_length():
        # short rows: numpy reduces each row in a call of its own; across a transposed copy the maximum runs
        # over long contiguous runs instead (the same values: a maximum is exact)
        rows_last = x.transpose((x.ndim - 1,) + tuple(range(x.ndim - 1)))  # np.moveaxis(x, -1, 0), without its checks
        np.maximum.reduce(np.ascontiguousarray(rows_last), axis=0, out=row_max[..., 0])
    else:
        np.max(x, axis=-1, keepdims=True, out=row_max)
    with np.errstate(invalid="ignore"):  # inf - inf where a row's max is +-inf: the NaN row torch gives too
        np.subtract(x, row_max, out=out)
    return row_max


_SHORT_ROW: list[int] = []  # [the measured length], once per process
_ROW_LENGTHS = (8, 16, 32, 64, 128, 256)


def short_row_length() -> int:
    """The longest row length at which the row maximum is faster over a transposed copy than by np.max along the
    rows, measured at first use on this machine (float32 blocks of 2^16 elements, best of 5 runs each; a row
    length counts when the copy wins by 10% there and at every shorter length); 0 when it never wins."""
    if not _SHORT_ROW:
        longest = 0
        for n in _ROW_LENGTHS:
            x = np.random.default_rng(0).standard_normal(((1 << 16) // n, n)).astype(np.float32)
            column = np.empty((x.shape[0], 1), np.float32)
            along, across = runtime.best_seconds(
                [functools.partial(_max_along, x, column), functools.partial(_max_across, x, column)], reps=5
            )
            if across > 0.9 * along:
                break
            longest = n
        _SHORT_ROW.append(longest)
    return _SHORT_ROW[0]


def _max_along(x, column):
    np.max(x, axis=-1, keepdims=True, out=column)


def _max_across(x, column):
    np.maximum.reduce(np.ascontiguousarray(x.T), axis=0, out=column[:, 0])


_LOG2E32 = np.float32(1 / np.log(2.0))


def exp_into(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = exp(a)`` (returns ``out``, which may be ``a``) for values that only enter a sum taken the log of
    (log_softmax's logsumexp). float32 goes through exp2(a log2 e): numpy's float32 exp2 runs at twice the speed
    of its exp (256x1000: 67 against 122 us, the multiplication included), but the product rounds once more, a
    relative error of up to |a| 2^-24 in each term -- the terms near the row max (a ~ 0), which make the sum,
    keep their accuracy, but a softmax's small probabilities would not (np.exp there). Other dtypes: np.exp."""
    if a.dtype == np.float32:
        np.multiply(a, _LOG2E32, out=out)
        return np.exp2(out, out=out)
    return np.exp(a, out=out)


# -- softmax / log_softmax -----------------------------------------------------------------------------------
def softmax_block(x: np.ndarray, out: np.ndarray) -> None:
    """``out = softmax(x)`` over each row: exp(x) times the reciprocal of its sum, without the shift by the row
    max where that sum lies in [1, sqrt(max float)] -- exp(x) / sum exp(x) is the same softmax, rounded once less
    than exp(x - max) (no x - max): nothing overflows there, 1 / sum is a normal number, and an exp(x) that
    underflows belongs to a probability (exp(x) / sum, sum >= 1) below the smallest normal number anyway. The
    other rows (logits beyond that range, +-inf, NaN) are computed as torch does, from exp(x - max) times the
    reciprocal of its sum. Rows of a few dozen take one reduction instead of two (numpy pays per row). Rows of
    one are exactly 1 (NaN at +-inf, NaN), as torch's."""
    if x.shape[-1] == 1:
        with np.errstate(invalid="ignore"):
            np.subtract(x, x, out=out)
        np.exp(out, out=out)
        return
    with np.errstate(over="ignore"):  # rows with a huge logit: exp overflows, and they are redone below
        np.exp(x, out=out)
    sums = row_sums(out)
    low, high = sums.min(initial=1.0), sums.max(initial=1.0)
    if not (low >= 1 and high <= _SAFE_SUM[x.dtype.char]):  # NaN sums fail too
        _softmax_shifted_rows(x, out, sums)
    out *= 1 / sums


def _softmax_shifted_rows(x: np.ndarray, out: np.ndarray, sums: np.ndarray) -> None:
    """``out = softmax(x)`` as exp(x - max) / sum in the rows whose sum in ``sums`` (exp(x) unshifted) lies
    outside [1, sqrt(max float)], their ``sums`` set to 1."""
    redo = ~((sums >= 1) & (sums <= _SAFE_SUM[x.dtype.char]))[..., 0]
    rows = np.empty_like(x[redo])
    subtract_row_max(x[redo], out=rows)
    np.exp(rows, out=rows)
    rows *= 1 / row_sums(rows)
    out[redo] = rows
    sums[redo] = 1


_SAFE_SUM = {t: np.sqrt(np.finfo(t).max) for t in "efdg"}


def log_softmax_block(x: np.ndarray, out: np.ndarray) -> None:
    """``out = log_softmax(x)`` over each row, as (x - max) - log(sum(exp(x - max))): subtracting logsumexp(x) in
    one step would round at |x| ~ 1e4."""
    subtract_row_max(x, out=out)
    out -= np.log(row_sums(exp_into(out, np.empty_like(out))))


def softmax_grad_block(g: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """``out = y * (g - sum(g * y))`` over each row: softmax's input gradient (torch's formula), y = softmax."""
    np.subtract(g, row_dots(g, y), out=out)
    out *= y


def log_softmax_grad_block(g: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """``out = g - exp(y) * sum(g)`` over each row: log_softmax's input gradient, y = log_softmax."""
    np.exp(y, out=out)
    out *= -row_sums(g)
    out += g


# -- layer_norm / rms_norm: rows (rows, features) ----------------------------------------------------------
def normalize_block(weight, bias, eps, subtract_mean: bool, x, xhat, out, rstd) -> None:
    """``xhat = (x - mean) * rstd`` with rstd = 1 / sqrt(mean((x - mean)^2) + eps) over each row (layer_norm,
    ``subtract_mean``), or x * rstd with rstd = 1 / sqrt(mean(x^2) + eps) (rms_norm); then ``out = xhat * weight
    + bias`` (``weight`` and ``bias``: vectors of the features, or None; ``out`` may be ``xhat`` itself when both
    are None, or for rms_norm). Fills the column ``rstd``."""
    n = x.shape[1]
    if subtract_mean:
        np.subtract(x, row_sums(x) / n, out=xhat)
        rstd[...] = 1 / np.sqrt(row_dots(xhat, xhat) / n + eps)
        xhat *= rstd
    else:
        rstd[...] = 1 / np.sqrt(row_dots(x, x) / n + eps)
        np.multiply(x, rstd, out=xhat)
    if weight is not None:
        np.multiply(xhat, weight, out=out)
    if bias is not None:
        np.add(xhat if weight is None else out, bias, out=out)


def normalize_grad_block(weight, need_weight: bool, need_bias: bool, subtract_mean: bool, g, xhat, x, rstd, dx):
    """The gradients of ``normalize_block``'s out = xhat * weight + bias given g = dL/dout, from the normalised
    rows ``xhat`` (layer_norm saves them) or, when it is None, from ``x`` (xhat = x * rstd, rms_norm): writes
    d x into ``dx`` (unless None) -- rstd times gx = g * weight with its components along xhat (and along the
    constant row, when the mean was subtracted) projected out -- and returns this block's sums over its rows of
    g xhat and of g (None where not needed): its parts of the gradients of weight and bias."""
    if xhat is None:
        xhat = x * rstd
    dw = np.einsum("ij,ij->j", g, xhat) if need_weight else None
    db = np.einsum("ij->j", g) if need_bias else None
    if dx is not None:
        n = g.shape[1]
        gx = g if weight is None else g * weight
        np.multiply(xhat, row_dots(gx, xhat) / n, out=dx)
        if subtract_mean:
            dx += row_sums(gx) / n
        np.subtract(gx, dx, out=dx)
        dx *= rstd
    return dw, db


# -- cross_entropy: classes last; ``weight`` is the class weights or None (all 1) ------------------------------
def exp_shifted_block(weight, x, shift, exps, row_sum, shifted_total) -> None:
    """``exps = exp(x - shift)`` over each row, the column ``row_sum`` of its sums and, unless None,
    ``shifted_total`` = sum_c w_c (x_c - shift): the pieces of cross_entropy's log_softmax, for any shift. The
    caller's ``shift`` is each row's target logit x_y (so log_sum is the loss itself, rounded once, and no row
    max is needed); rows where that overflows (x_y far below the others) or is not finite are done again with
    their max as the shift (written into ``shift``), as torch shifts every row."""
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite or far-off targets: redone below
        np.subtract(x, shift, out=exps)
        if shifted_total is not None:
            shifted_total[...] = row_sums(exps) if weight is None else row_dots(exps, weight)
        np.exp(exps, out=exps)
    row_sum[...] = row_sums(exps)
    if not row_sum.max(initial=1.0) <= _SAFE_SUM[x.dtype.char]:  # NaN fails too
        redo = ~(row_sum <= _SAFE_SUM[x.dtype.char])[..., 0]
        rows = np.empty_like(x[redo])
        shift[redo] = subtract_row_max(x[redo], out=rows)
        if shifted_total is not None:
            shifted_total[redo] = row_sums(rows) if weight is None else row_dots(rows, weight)
        np.exp(rows, out=rows)
        row_sum[redo] = row_sums(rows)
        exps[redo] = rows


def cross_entropy_grad_block(weight, exps, scale, smooth, out) -> None:
    """``out = exps * scale - smooth * w`` over each row (``scale``, ``smooth``: columns; smooth None: no such
    term): cross_entropy's input gradient except for each target class's own term."""
    np.multiply(exps, scale, out=out)
    if smooth is not None:
        out -= smooth if weight is None else smooth * weight
