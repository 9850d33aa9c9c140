"""Default sample generators, one per op family: the inputs the generated tests run every op on.

A generator is ``fn(rng) -> list[Sample]`` in float64. The defaults cover scalars, size-1 dims,
broadcasting pairs, negative dims, keepdim both ways and non-contiguous (transposed) arrays; an op with
unusual inputs writes its own generator next to its declaration.
"""

import numpy as np

from tape.registry import Sample

__all__ = ["unary_samples", "binary_samples", "reduction_samples", "uniform", "transposed"]


def uniform(rng, shape, low=-2.0, high=2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape)


def transposed(rng, shape, low=-2.0, high=2.0) -> np.ndarray:
    """A non-contiguous array of ``shape`` (the transpose of a contiguous one)."""
    return uniform(rng, tuple(reversed(shape)), low, high).T


def unary_samples(low=-2.0, high=2.0, attrs=None):
    """Elementwise ops: a scalar, a vector, a matrix, a transposed 3-D array; values in [low, high]."""
    attr_sets = attrs or [{}]

    def generate(rng):
        out = []
        for extra in attr_sets:
            out += [Sample((uniform(rng, (), low, high),), dict(extra), "scalar"),
                    Sample((uniform(rng, (5,), low, high),), dict(extra), "vector"),
                    Sample((uniform(rng, (2, 3), low, high),), dict(extra), "matrix"),
                    Sample((transposed(rng, (3, 1, 4), low, high),), dict(extra), "non-contiguous")]
        return out

    return generate


BROADCAST_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 1, 3), (4, 1)), ((), (2, 3)),
                   ((3, 1), (1, 3)), ((1,), ())]


def binary_samples(low=-2.0, high=2.0, low_b=None, high_b=None):
    """Binary ops: broadcasting pairs (including scalars and size-1 dims) and a transposed pair."""
    low_b = low if low_b is None else low_b
    high_b = high if high_b is None else high_b

    def generate(rng):
        out = [Sample((uniform(rng, sa, low, high), uniform(rng, sb, low_b, high_b)), {}, f"{sa} with {sb}")
               for sa, sb in BROADCAST_PAIRS]
        out.append(Sample((transposed(rng, (3, 4), low, high), uniform(rng, (3, 4), low_b, high_b)), {},
                          "non-contiguous"))
        return out

    return generate


def reduction_samples(low=-2.0, high=2.0, dims=(None, 0, -1, (0, 2), (-1, -3)), extra=None):
    """Reductions: a 3-D array over several dims, keepdim both ways, and a full reduction of a vector."""
    extra = extra or {}

    def generate(rng):
        out = []
        for dim in dims:
            for keepdim in (False, True):
                out.append(Sample((uniform(rng, (2, 3, 4), low, high),), {"dim": dim, "keepdim": keepdim, **extra},
                                  f"dim={dim} keepdim={keepdim}"))
        out.append(Sample((transposed(rng, (3, 4), low, high),), {"dim": 1, "keepdim": False, **extra},
                          "non-contiguous"))
        out.append(Sample((uniform(rng, (5,), low, high),), {"dim": None, "keepdim": False, **extra}, "vector"))
        return out

    return generate
