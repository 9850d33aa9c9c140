"""Shape ops: views and rearrangements whose backward routes the gradient back to its positions."""

__all__ = ['reshape', 'transpose', 'permute', 'getitem']

import numpy as np

from tape.registry import Sample, defop

from .samples import transposed, uniform
from .validation import normalize_dim


# -- reshape -----------------------------------------------------------------------------------------------
def _reshape(x, shape):
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    try:
        return x.reshape(shape)
    except ValueError:
        raise ValueError(f"reshape: argument 'shape' expected a shape with {x.size} elements for input "
                         f"{x.shape}, got {shape}") from None


reshape = defop("reshape", family="shape", inputs=("x",), forward=_reshape,
                vjps=(lambda g, ans, x, shape: g.reshape(x.shape),),
                samples=lambda rng: [Sample((uniform(rng, (2, 3, 4)),), {"shape": (6, 4)}),
                                     Sample((uniform(rng, (2, 3, 4)),), {"shape": (4, -1)}),
                                     Sample((transposed(rng, (3, 4)),), {"shape": (12,)}, "non-contiguous"),
                                     Sample((uniform(rng, ()),), {"shape": (1, 1)})],
                torch_ref=lambda torch, x, shape: torch.reshape(x, tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape))


# -- transpose / permute -----------------------------------------------------------------------------------
def _transpose(x, dim0=-2, dim1=-1):
    return np.swapaxes(x, normalize_dim("transpose", dim0, x.ndim, "dim0"), normalize_dim("transpose", dim1, x.ndim, "dim1"))


transpose = defop("transpose", family="shape", inputs=("x",), forward=_transpose,
                  vjps=(lambda g, ans, x, dim0=-2, dim1=-1: _transpose(g, dim0, dim1),),
                  samples=lambda rng: [Sample((uniform(rng, (2, 3)),), {"dim0": 0, "dim1": 1}),
                                       Sample((uniform(rng, (2, 3, 4)),), {"dim0": -1, "dim1": 0}),
                                       Sample((uniform(rng, (2, 3, 4)),), {"dim0": 1, "dim1": 1})],
                  torch_ref=lambda torch, x, dim0=-2, dim1=-1: torch.transpose(x, dim0, dim1))


def _permutation(x, dims):
    dims = tuple(normalize_dim("permute", d, x.ndim, "dims") for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise ValueError(f"permute: argument 'dims' expected a permutation of {x.ndim} dims, got {dims}")
    return dims


def _permute(x, dims):
    return np.transpose(x, _permutation(x, dims))


permute = defop("permute", family="shape", inputs=("x",), forward=_permute,
                vjps=(lambda g, ans, x, dims: np.transpose(g, np.argsort(_permutation(x, dims))),),
                samples=lambda rng: [Sample((uniform(rng, (2, 3, 4)),), {"dims": (2, 0, 1)}),
                                     Sample((uniform(rng, (2, 3)),), {"dims": (-1, 0)})],
                torch_ref=lambda torch, x, dims: torch.permute(x, dims))


# -- getitem -----------------------------------------------------------------------------------------------
def _index(index):
    """The index with any Tensor inside replaced by its array."""
    if isinstance(index, tuple):
        return tuple(_index(i) for i in index)
    data = getattr(index, "_data", None)
    return data if data is not None else index


def _has_arrays(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray | list) for p in parts)


def _getitem(x, index):
    try:
        return x[_index(index)]
    except IndexError as e:
        raise IndexError(f"getitem: index {index!r} does not fit input of shape {x.shape}: {e}") from None


def _getitem_vjp(g, ans, x, index):
    index = _index(index)
    grad = np.zeros(x.shape, dtype=g.dtype)
    if _has_arrays(index):
        np.add.at(grad, index, g)  # repeated integer indices accumulate
    else:
        grad[index] = g
    return grad


def _getitem_samples(rng):
    x = uniform(rng, (4, 5))
    return [Sample((x,), {"index": (1,)}, "int"),
            Sample((x,), {"index": (slice(None, None, 2), slice(1, 4))}, "slices with step"),
            Sample((x,), {"index": (Ellipsis, -1)}, "ellipsis"),
            Sample((x,), {"index": (np.array([0, 2, 2, 3]),)}, "repeated integer array"),
            Sample((x,), {"index": (np.array([0, 1]), np.array([4, 4]))}, "paired integer arrays"),
            Sample((uniform(rng, (3, 4, 2)),), {"index": (slice(None), None, np.array([1, 3]))}, "newaxis + array"),
            Sample((x,), {"index": (x > 0,)}, "boolean mask")]


def _torch_index(torch, index):
    if isinstance(index, tuple):
        return tuple(_torch_index(torch, i) for i in index)
    return torch.from_numpy(index) if isinstance(index, np.ndarray) else index


getitem = defop("getitem", family="shape", inputs=("x",), forward=_getitem, vjps=(_getitem_vjp,),
                samples=_getitem_samples,
                torch_ref=lambda torch, x, index: x[_torch_index(torch, _index(index))])
