"""Default sample generators, one per op family: the inputs the generated tests run every op on.

A generator is ``fn(rng) -> list[Sample]`` in float64. The defaults cover scalars, size-1 dims,
broadcasting pairs, negative dims, keepdim both ways, non-contiguous (transposed) arrays and zero-size
arrays (shape (0, 3), a size-1 dim broadcast against 0, a reduction over a zero-size dim); an op with
unusual inputs writes its own generator next to its declaration.

Finite differences are only meaningful where the op is smooth: ``kinks=`` (the points where an op's
derivative jumps, e.g. relu at 0 or clamp's bounds) pushes every sample value at least ``KINK_GAP``
away from them, so no gradcheck straddles a kink.
"""

import numpy as np

from tape.registry import Sample

__all__ = [
    "along_dim_samples",
    "unary_samples",
    "binary_samples",
    "comparison_samples",
    "where_samples",
    "reduction_samples",
    "index_reduction_samples",
    "uniform",
    "transposed",
    "away_from",
    "KINK_GAP",
]

KINK_GAP = 1e-3  # far beyond gradcheck's eps (1e-6), and kept by a float32 cast


def uniform(rng, shape, low=-2.0, high=2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape)


def transposed(rng, shape, low=-2.0, high=2.0) -> np.ndarray:
    """A non-contiguous array of ``shape`` (the transpose of a contiguous one)."""
    return uniform(rng, tuple(reversed(shape)), low, high).T


def away_from(array: np.ndarray, points=(), gap: float = KINK_GAP) -> np.ndarray:
    """``array`` with every value closer than ``gap`` to one of ``points`` moved to ``point +- gap``
    (keeping its side); the array's memory layout (e.g. transposed) is kept."""
    if not points:
        return array
    out = array.copy(order="K")
    for p in points:
        near = np.abs(out - p) < gap
        out[near] = np.where(out[near] >= p, p + gap, p - gap)
    return out


def unary_samples(low=-2.0, high=2.0, attrs=None, kinks=()):
    """Elementwise ops: a scalar, a vector, a matrix, a transposed 3-D array; values in [low, high],
    away from ``kinks``. One set per attribute dict in ``attrs``."""
    attr_sets = attrs or [{}]

    def draw(rng, shape, make=uniform):
        return away_from(make(rng, shape, low, high), kinks)

    def generate(rng):
        out = []
        for extra in attr_sets:
            out += [
                Sample((draw(rng, ()),), dict(extra), "scalar"),
                Sample((draw(rng, (5,)),), dict(extra), "vector"),
                Sample((draw(rng, (2, 3)),), dict(extra), "matrix"),
                Sample((away_from(transposed(rng, (3, 1, 4), low, high), kinks),), dict(extra), "non-contiguous"),
                Sample((draw(rng, (0, 3)),), dict(extra), "zero-size"),
            ]
        return out

    return generate


BROADCAST_PAIRS = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1, 3), (4, 1)),
    ((), (2, 3)),
    ((3, 1), (1, 3)),
    ((1,), ()),
    ((0, 3), (3,)),
    ((4, 1), (0,)),
]  # zero-size: an empty operand, and a size-1 dim stretched to 0


def binary_samples(low=-2.0, high=2.0, low_b=None, high_b=None):
    """Binary ops: broadcasting pairs (including scalars and size-1 dims) and a transposed pair."""
    low_b = low if low_b is None else low_b
    high_b = high if high_b is None else high_b

    def generate(rng):
        out = [
            Sample((uniform(rng, sa, low, high), uniform(rng, sb, low_b, high_b)), {}, f"{sa} with {sb}")
            for sa, sb in BROADCAST_PAIRS
        ]
        out.append(
            Sample((transposed(rng, (3, 4), low, high), uniform(rng, (3, 4), low_b, high_b)), {}, "non-contiguous")
        )
        return out

    return generate


def comparison_samples():
    """Comparisons: the broadcasting pairs plus pairs with exact ties (equal entries), where eq/le/ge differ
    from ne/lt/gt. Tied values are small integers, exact in float32 too."""
    pairs = binary_samples()

    def generate(rng):
        a = rng.integers(-2, 3, size=(3, 4)).astype(np.float64)
        b = rng.integers(-2, 3, size=(4,)).astype(np.float64)
        return pairs(rng) + [Sample((a, b), {}, "ties (3, 4) with (4,)"), Sample((a, a.copy()), {}, "all tied")]

    return generate


WHERE_SHAPES = [
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), ()),
    ((2, 1), (1, 3), (2, 3)),
    ((3,), (2, 1, 3), (1,)),
    ((), (2, 3), (2, 3)),
    ((0, 3), (3,), ()),
    ((2, 1), (0,), (1,)),
]  # the last two: zero-size


def where_samples(low=-2.0, high=2.0):
    """where(condition, input, other): a bool condition broadcast against two float operands."""

    def generate(rng):
        out = [
            Sample(
                (rng.random(sc) > 0.5, uniform(rng, sa, low, high), uniform(rng, sb, low, high)),
                {},
                f"{sc}, {sa}, {sb}",
            )
            for sc, sa, sb in WHERE_SHAPES
        ]
        out.append(
            Sample(
                (rng.random((3, 4)) > 0.5, transposed(rng, (3, 4), low, high), uniform(rng, (4,), low, high)),
                {},
                "non-contiguous",
            )
        )
        return out

    return generate


def along_dim_samples(rng):
    """Samples of a softmax-like op over one ``dim`` (softmax, log_softmax, softmin): every dim, non-contiguous,
    size-1, 0-D, huge logits, an empty dim and no rows."""
    return [
        Sample((uniform(rng, (2, 3, 4)),), {"dim": -1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": 1}),
        Sample((uniform(rng, (2, 3, 4)),), {"dim": 0}),
        Sample((transposed(rng, (3, 5)),), {"dim": -1}, "non-contiguous"),
        Sample((uniform(rng, (4, 1)),), {"dim": 1}, "size-1 dim"),
        Sample((uniform(rng, ()),), {"dim": 0}, "scalar"),
        Sample((uniform(rng, (3, 4), -1e4, 1e4),), {"dim": -1}, "logits of +-1e4"),
        Sample((uniform(rng, (3, 0)),), {"dim": -1}, "empty dim"),
        Sample((uniform(rng, (0, 3)),), {"dim": -1}, "zero rows"),
    ]


def reduction_samples(low=-2.0, high=2.0, dims=(None, 0, -1, (0, 2), (-1, -3)), extra=None, empty_dims=True):
    """Reductions: a 3-D array over several dims, keepdim both ways, a full reduction of a vector, and an
    array with a zero-size dim reduced over another dim. With ``empty_dims`` (ops defined on no entries,
    like sum = 0) also reduced over the zero-size dim itself, alone, in a tuple and as a full reduction."""
    extra = extra or {}

    def generate(rng):
        out = []
        for dim in dims:
            for keepdim in (False, True):
                out.append(
                    Sample(
                        (uniform(rng, (2, 3, 4), low, high),),
                        {"dim": dim, "keepdim": keepdim, **extra},
                        f"dim={dim} keepdim={keepdim}",
                    )
                )
        out.append(
            Sample((transposed(rng, (3, 4), low, high),), {"dim": 1, "keepdim": False, **extra}, "non-contiguous")
        )
        out.append(Sample((uniform(rng, (5,), low, high),), {"dim": None, "keepdim": False, **extra}, "vector"))
        empty = [(-1, False)] + ([(1, False), ((1, 2), True), (None, False)] if empty_dims else [])
        for dim, keepdim in empty:
            out.append(
                Sample(
                    (uniform(rng, (2, 0, 4), low, high),),
                    {"dim": dim, "keepdim": keepdim, **extra},
                    f"zero-size dim={dim}",
                )
            )
        return out

    return generate


def index_reduction_samples(low=-2.0, high=2.0):
    """argmax / argmin: dim None or a single int (as in torch), keepdim both ways, a transposed input, a
    vector and a 0-D input."""
    base = reduction_samples(low, high, dims=(None, 0, -1, 1), empty_dims=False)

    def generate(rng):
        return base(rng) + [
            Sample((uniform(rng, (), low, high),), {"dim": dim, "keepdim": keepdim}, f"0-D dim={dim}")
            for dim, keepdim in ((None, False), (0, False), (-1, True))
        ]

    return generate
