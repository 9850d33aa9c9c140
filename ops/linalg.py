"""Linear algebra: matmul, linear (x W^T + b) and einsum, each with its VJPs, torch 2.13 semantics.

matmul and linear sit on the training hot path: when a batched operand meets a plain matrix, the batch
dims are folded into the rows so one GEMM does the work (no batched loop and no broadcast-then-sum of
the weight gradient).

einsum is torch's ``einsum(equation, *operands)`` (the operands may also come as one list): one op with a
sequence input, any number of operands. The VJP of an einsum is an einsum of the output gradient with the
other operands; labels an operand sums alone are broadcast back, repeated labels ('ii->i', traces) put the
gradient on the diagonal (in place on arrays; as an einsum with a 0/1 delta on Tensors, so it records), and
labelled or '...' dims of size 1 that were broadcast are summed back to size 1.

Every rule is written with numpy functions that map to registered ops, so all three are differentiable
twice (``create_graph=True``). Zero-size operands work as in torch: a contraction over an empty label
gives zeros.
"""

__all__ = ["matmul", "linear", "einsum"]

import functools
import math
import string
from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tape.broadcast import unbroadcast
from tape.onnx import lowering
from tape.registry import Sample, defop

from . import _numpy
from ._kernels import runtime
from ._onnx import NotExportable, no_attributes
from ._samples import transposed, uniform


def _same_dtype(op: str, names: tuple, arrays) -> None:
    first = arrays[0]
    for name, a in zip(names[1:], arrays[1:]):
        if a is not None and a.dtype != first.dtype:
            raise TypeError(
                f"{op}: argument '{name}' expected dtype {first.dtype} (that of '{names[0]}'), got {a.dtype}"
            )


# -- matmul ------------------------------------------------------------------------------------------------
def _check_matmul(input, other):
    if input.ndim == 0 or other.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got shapes {input.shape} and {other.shape}")
    k_a = input.shape[-1]
    k_b = other.shape[0] if other.ndim == 1 else other.shape[-2]
    if k_a != k_b:
        raise ValueError(
            f"matmul: argument 'other' expected {k_a} rows to match the last dim of input "
            f"{input.shape}, got shape {other.shape}"
        )
    try:
        np.broadcast_shapes(input.shape[:-2], other.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: argument 'other' expected batch dims broadcastable with input's "
            f"{input.shape[:-2]}, got shape {other.shape}"
        ) from None
    _same_dtype("matmul", ("input", "other"), (input, other))


def _times_matrix(a, m):
    """``a @ m`` for a matrix ``m``; a batched ``a`` is folded into rows so one GEMM does it all."""
    if a.ndim == 1:
        return a @ m
    if a.ndim == 2:
        return _gemm(a, m)
    return _gemm(_rows(a), m).reshape(a.shape[:-1] + (m.shape[-1],))


def _batched(a, b):
    """``a @ b`` with batch dims (numpy runs one GEMM per batch element), BLAS threads by one GEMM's size."""
    m = a.shape[-2] if a.ndim >= 2 else 1
    with runtime.blas_for(2 * m * a.shape[-1] * (b.shape[-1] if b.ndim >= 2 else 1)):
        return a @ b


def _matmul(input, other):
    """``torch.matmul(input, other)``: 1-D operands are vectors, batch dims broadcast."""
    return _times_matrix(input, other) if other.ndim == 2 else _batched(input, other)


def _as_matrices(g, a, b):
    """View 1-D operands (and the matching gradient) as matrices, as matmul itself does."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if b.ndim == 1:
        g = g[..., None]
    if a.ndim == 1:
        g = g[..., None, :]
    return g, a2, b2


def _matmul_vjp_input(g, ans, input, other):
    g2, a2, b2 = _as_matrices(g, input, other)
    if b2.ndim == 2:
        return np.reshape(_times_matrix(g2, b2.T), input.shape)
    return np.reshape(unbroadcast(_batched(g2, np.swapaxes(b2, -1, -2)), a2.shape), input.shape)


def _matmul_vjp_other(g, ans, input, other):
    g2, a2, b2 = _as_matrices(g, input, other)
    if b2.ndim == 2:  # every batch of input met the same matrix: one GEMM over all rows
        return np.reshape(_gemm(_rows(a2).T, _rows(g2)), other.shape)
    return np.reshape(unbroadcast(_batched(np.swapaxes(a2, -1, -2), g2), b2.shape), other.shape)


def _matmul_samples(rng):
    shapes = [
        ((3,), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((2, 3), (3, 4)),
        ((5, 2, 3), (3, 4)),
        ((2, 3), (5, 3, 4)),
        ((2, 1, 2, 3), (4, 3, 2)),
        ((4,), (2, 4, 3)),
        ((2, 2, 3), (3,)),
        ((2, 1, 3), (3, 1)),
    ]
    out = [Sample((uniform(rng, sa), uniform(rng, sb)), {}, f"{sa} @ {sb}") for sa, sb in shapes]
    out.append(Sample((uniform(rng, (3, 2)).T, uniform(rng, (4, 3)).T), {}, "non-contiguous"))
    out.append(Sample((transposed(rng, (3, 2, 2)), uniform(rng, (2, 3))), {}, "non-contiguous batched @ matrix"))
    zero = [
        ((2, 0), (0, 3), "inner dim 0: zeros"),
        ((0, 3), (3, 2), "no rows"),
        ((2, 0, 3), (3, 4), "empty batch"),
        ((3,), (3, 0), "no columns"),
        ((0,), (0,), "empty dot"),
        ((2, 2, 0), (2, 0, 3), "batched, inner dim 0"),
    ]
    out += [Sample((uniform(rng, sa), uniform(rng, sb)), {}, f"{sa} @ {sb}, {label}") for sa, sb, label in zero]
    return out


matmul = defop(
    "matmul",
    family="linalg",
    inputs=("input", "other"),
    forward=_matmul,
    vjps=(_matmul_vjp_input, _matmul_vjp_other),
    check=_check_matmul,
    samples=_matmul_samples,
    torch_ref=lambda torch, input, other: torch.matmul(input, other),
    method=True,
    numpy=np.matmul,
)


# -- linear ------------------------------------------------------------------------------------------------
def _check_linear(input, weight, bias=None):
    if input.ndim == 0 or weight.ndim not in (1, 2):
        raise ValueError(
            f"linear: arguments 'input' and 'weight' expected at least 1 dim and a 1-D/2-D weight, "
            f"got shapes {input.shape} and {weight.shape}"
        )
    if input.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear: argument 'weight' expected in_features {input.shape[-1]} (input's last dim, input "
            f"{input.shape}), got shape {weight.shape}"
        )
    if bias is not None:
        out_features = weight.shape[0] if weight.ndim == 2 else None
        if out_features is None or bias.ndim > 1 or bias.size not in (1, out_features):
            raise ValueError(
                f"linear: argument 'bias' expected shape ({out_features},) (or one element) for weight "
                f"{weight.shape}, got {bias.shape}"
            )
    _same_dtype("linear", ("input", "weight", "bias"), (input, weight, bias))


def _rows(x):
    """``x`` as a matrix of its last dim (size-0 leading dims kept: ``reshape(-1, k)`` fails on them)."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _gemm(a, b):
    """``a @ b`` for matrices, BLAS single-threaded when the product is small (``runtime.blas_for``)."""
    with runtime.blas_for(2 * a.shape[0] * a.shape[1] * b.shape[-1]):
        return a @ b


def _linear(input, weight, bias=None):
    y = _gemm(_rows(input), weight.T) if weight.ndim == 2 else _rows(input) @ weight
    if bias is not None:
        y += bias  # y is a fresh array: add in place, no extra copy
    return y.reshape(input.shape[:-1] + weight.shape[:-1])


def _grad_rows(g, weight):
    """The output gradient as rows matching ``_rows(input) @ weight.T``."""
    return g.reshape(math.prod(g.shape[:-1]), weight.shape[0]) if weight.ndim == 2 else g.reshape(-1)


def _linear_vjp_input(g, ans, input, weight, bias=None):
    g2 = _grad_rows(g, weight)
    grad = _gemm(g2, weight) if weight.ndim == 2 else g2[:, None] * weight
    return np.reshape(grad, input.shape)


def _linear_vjp_weight(g, ans, input, weight, bias=None):
    g2 = _grad_rows(g, weight)
    return _gemm(g2.T, _rows(input)) if weight.ndim == 2 else g2 @ _rows(input)


def _linear_vjp_bias(g, ans, input, weight, bias=None):
    if bias.shape == (weight.shape[0],):
        return np.sum(_grad_rows(g, weight), axis=0)
    return np.reshape(np.sum(g), bias.shape)


def _linear_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    return [
        Sample((u(2, 3), u(4, 3), u(4)), {}, "matrix"),
        Sample((u(5, 2, 3), u(4, 3), u(4)), {}, "batched"),
        Sample((u(3), u(4, 3), u(4)), {}, "1-D input"),
        Sample((u(2, 3), u(4, 3), None), {}, "no bias"),
        Sample((u(2, 1, 3), u(1, 3), u(1)), {}, "size-1 dims"),
        Sample((u(2, 3), u(4, 3), u(1)), {}, "one-element bias"),
        Sample((u(2, 3), u(4, 3), u()), {}, "0-D bias"),
        Sample((transposed(rng, (2, 2, 3)), transposed(rng, (4, 3)), u(4)), {}, "non-contiguous"),
        Sample((u(2, 3), u(3), None), {}, "1-D weight"),
        Sample((u(0, 3), u(4, 3), u(4)), {}, "no rows"),
        Sample((u(2, 0), u(4, 0), u(4)), {}, "no in_features: the bias"),
        Sample((u(2, 3), u(0, 3), u(0)), {}, "no out_features"),
        Sample((u(2, 0, 3), u(0, 3), None), {}, "empty batch, no out_features"),
    ]


linear = defop(
    "linear",
    family="linalg",
    inputs=("input", "weight", "bias?"),
    forward=_linear,
    vjps=(_linear_vjp_input, _linear_vjp_weight, _linear_vjp_bias),
    check=_check_linear,
    samples=_linear_samples,
    torch_ref=lambda torch, input, weight, bias=None: torch.nn.functional.linear(input, weight, bias),
)


# -- einsum ------------------------------------------------------------------------------------------------
_LABELS = string.ascii_letters


@dataclass
class _Plan:
    """An einsum equation resolved for given operand shapes: '...' replaced by explicit labels."""

    terms: tuple  # explicit labels of each operand (may repeat within a term)
    output: str
    sizes: dict  # label -> size after broadcasting size-1 dims
    broadcast: bool  # some operand has a size-1 dim for a label whose size is larger
    optimize: bool  # big enough for numpy's contraction-order search (BLAS) to pay off

    @property
    def equation(self) -> str:
        return ",".join(self.terms) + "->" + self.output

    def full(self, arrays) -> list:
        """The operands with their broadcast size-1 dims expanded (views)."""
        if not self.broadcast:
            return list(arrays)
        return [np.broadcast_to(a, tuple(self.sizes[c] for c in t)) for a, t in zip(arrays, self.terms)]


def _einsum_error(equation, message):
    return ValueError(f"einsum: argument 'equation' {message} (equation {equation!r})")


def _split_ellipsis(equation, term, what):
    head, dots, tail = term.partition("...")
    if "." in head or "." in tail:
        raise _einsum_error(equation, f"expected at most one '...' and no other '.' in the {what}, got {term!r}")
    return head, bool(dots), tail


@functools.lru_cache(maxsize=1024)
def _plan(equation, shapes) -> _Plan:
    eq = equation.replace(" ", "")
    bad = sorted(set(eq) - set(_LABELS) - set(".,->"))
    if bad:
        raise _einsum_error(equation, f"expected subscripts among a-z, A-Z, ',', '...' and '->', got {bad}")
    lhs, arrow, rhs = eq.partition("->")
    if any(c in part for c in "->" for part in (lhs, rhs)):
        raise _einsum_error(equation, "expected at most one '->'")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _einsum_error(equation, f"expected subscripts for the {len(shapes)} operand(s) given, got {len(terms)}")
    free = [c for c in _LABELS if c not in eq]
    parsed = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        head, dots, tail = _split_ellipsis(equation, term, f"subscripts of operand {k}")
        n_ellipsis = len(shape) - len(head) - len(tail)
        if n_ellipsis < 0 or (not dots and n_ellipsis):
            raise _einsum_error(
                equation, f"expected subscripts for the {len(shape)} dims of operand {k} (shape {shape}), got {term!r}"
            )
        parsed.append((head, n_ellipsis, tail))
    n_ellipsis = max((n for _, n, _ in parsed), default=0)
    ellipsis = "".join(free[:n_ellipsis])
    explicit = tuple(head + ellipsis[n_ellipsis - n :] + tail for head, n, tail in parsed)

    sizes: dict[str, int] = {}
    broadcast = False
    for k, (term, shape) in enumerate(zip(explicit, shapes)):
        own: dict[str, int] = {}
        for c, n in zip(term, shape):
            if own.setdefault(c, n) != n:
                raise _einsum_error(
                    equation,
                    f"expected equal sizes for subscript {c!r} repeated in operand {k}, "
                    f"got {own[c]} and {n} (shape {shape})",
                )
        for c, n in own.items():
            seen = sizes.get(c, n)
            if n != seen and 1 not in (n, seen):
                raise _einsum_error(
                    equation, f"expected size {seen} (or 1) for subscript {c!r} of operand {k}, got {n} (shape {shape})"
                )
            sizes[c] = n if seen == 1 else seen
            broadcast = broadcast or n != seen
    if arrow:
        head, dots, tail = _split_ellipsis(equation, rhs, "output")
        output = head + (ellipsis if dots else "") + tail
        for c in output:
            if output.count(c) > 1 or c not in sizes:
                raise _einsum_error(
                    equation, f"expected output subscripts that appear once in the output and in an operand, got {c!r}"
                )
    else:
        counts = Counter(c for head, _, tail in parsed for c in head + tail)
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1))
    optimize = len(shapes) > 1 and math.prod(sizes.values()) >= 1 << 14
    return _Plan(explicit, output, sizes, broadcast, optimize)


def _plan_for(equation, arrays) -> _Plan:
    if not isinstance(equation, str):
        raise TypeError(f"einsum: argument 'equation' expected a str, got {type(equation).__name__}")
    return _plan(equation, tuple(a.shape for a in arrays))


def _check_einsum(operands, equation):
    _same_dtype("einsum", tuple(f"operands[{k}]" for k in range(len(operands))), operands)
    _plan_for(equation, operands)


def _einsum(equation, *operands):
    """``torch.einsum(equation, *operands)`` (the operands may also come as one list)."""
    plan = _plan_for(equation, operands)
    return np.asarray(np.einsum(plan.equation, *plan.full(operands), optimize=plan.optimize))


def _contract(equation: str, optimize: bool, *operands):
    """``np.einsum`` on arrays (first order); the einsum op on Tensors, so the backward is recorded."""
    if all(isinstance(o, np.ndarray) for o in operands):
        return np.asarray(np.einsum(equation, *operands, optimize=optimize))
    return einsum(equation, *operands)


def _on_diagonal(plan: _Plan, term: str, labels: str, grad, shape, dtype):
    """A zero array of ``shape`` (subscripts ``term``, repeating labels) holding ``grad`` (subscripts
    ``labels``, each once) on its diagonal: where all dims of one label have equal positions."""
    if isinstance(grad, np.ndarray):
        out = np.zeros(shape, dtype=dtype)
        strides = tuple(sum(out.strides[p] for p, c2 in enumerate(term) if c2 == c) for c in labels)
        as_strided(out, shape=grad.shape, strides=strides)[...] = grad
        return out
    # grad * delta, as an einsum: every repeat of a label gets a fresh label, tied back by a 0/1 delta
    used = set("".join(plan.terms) + plan.output)
    fresh = iter(c for c in _LABELS if c not in used)
    unique, delta = "", np.ones(shape, dtype=bool)
    for p, c in enumerate(term):
        first = term.index(c)
        unique += c if first == p else next(fresh)
        if first != p:

            def position(d):  # the positions along dim d, shaped to broadcast over the others
                return np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(len(shape))])

            delta = delta & (position(first) == position(p))
    return einsum(f"{labels},{unique}->{unique}", grad, delta.astype(dtype))


def _einsum_operand_grad(plan: _Plan, k: int, g, arrays):
    """d(sum(g * einsum(...))) / d(operand k), itself an einsum of g with the other operands."""
    term, shape = plan.terms[k], arrays[k].shape
    labels = "".join(dict.fromkeys(term))  # distinct labels of operand k, in order
    others = [(t, a) for j, (t, a) in enumerate(zip(plan.terms, plan.full(arrays))) if j != k]
    reachable = set(plan.output).union(*[t for t, _ in others])
    kept = "".join(c for c in labels if c in reachable)
    grad = _contract(
        ",".join([plan.output] + [t for t, _ in others]) + "->" + kept, plan.optimize, g, *[a for _, a in others]
    )
    if kept != labels:  # labels summed by operand k alone: its gradient is constant along them
        grad = np.expand_dims(grad, tuple(i for i, c in enumerate(labels) if c not in reachable))
        grad = np.broadcast_to(grad, tuple(plan.sizes[c] for c in labels))
    own_sizes = tuple(shape[term.index(c)] for c in labels)
    stretched = tuple(i for i, (c, n) in enumerate(zip(labels, own_sizes)) if n != plan.sizes[c])
    if stretched:  # size-1 dims broadcast in the forward: sum back
        grad = np.sum(grad, axis=stretched, keepdims=True)
    if len(labels) == len(term):
        return grad
    # repeated labels ('ii'): the gradient lives on the diagonal, every other entry is zero
    return _on_diagonal(plan, term, labels, grad, shape, arrays[k].dtype)


def _einsum_vjp(g, ans, operands, *, needs, equation):
    plan = _plan_for(equation, operands)
    return ([_einsum_operand_grad(plan, k, g, operands) if need else None for k, need in enumerate(needs[0])],)


def _einsum_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    cases = [
        ("ii->i", [u(3, 3)], "diagonal"),
        ("ii", [u(3, 3)], "trace, implicit output"),
        ("ij->ji", [transposed(rng, (2, 3))], "transpose, non-contiguous"),
        ("i->", [u(4)], "sum"),
        ("iji->j", [u(3, 2, 3)], "repeated label around another"),
        ("...ij->...ji", [u(2, 3, 4)], "'...'"),
        ("bA", [u(2, 3)], "implicit output, upper case sorts first"),
        ("ij,jk->ik", [u(2, 3), u(3, 4)], "matmul"),
        ("bij,bjk->bik", [u(2, 2, 3), u(2, 3, 2)], "batched"),
        ("...ij,...jk->...ik", [u(2, 1, 2, 3), u(4, 3, 2)], "'...' broadcast"),
        ("ij,ij->ij", [u(1, 3), u(2, 3)], "size-1 label broadcast"),
        ("i,j->ij", [u(3), u(4)], "outer"),
        ("ii,i->i", [u(3, 3), u(3)], "diagonal times vector"),
        ("ij,k->ik", [u(2, 3), u(4)], "labels summed alone"),
        ("ij,ij", [u(2, 3), u(2, 3)], "implicit dot"),
        ("ij,jk", [transposed(rng, (2, 3)), transposed(rng, (3, 4))], "non-contiguous, implicit"),
        ("...i,...i->...", [u(3, 4), u(4)], "'...' of different ranks"),
        ("ij,jk,kl->il", [u(2, 3), u(3, 2), u(2, 4)], "chain of 3"),
        ("i,i,i->", [u(4), u(4), u(4)], "3 vectors"),
        ("bi,bj,b->bij", [u(2, 3), u(2, 2), u(2)], "3 operands, batch kept"),
        ("ii,ij,jj->", [u(2, 2), u(2, 2), u(2, 2)], "3 operands, repeated labels"),
        ("ij,jk,kl,lm,mn->in", [u(2, 3), u(3, 2), u(2, 2), u(2, 3), u(3, 2)], "chain of 5"),
        ("iij,jkk,k->i", [u(2, 2, 3), u(3, 2, 2), u(2)], "repeated labels in two operands"),
        ("ij,jk->ik", [u(2, 0), u(0, 3)], "zero-size contracted label: zeros"),
        ("bi,bj->ij", [u(0, 2), u(0, 3)], "zero-size batch summed"),
        ("ii->i", [u(0, 0)], "zero-size diagonal"),
        ("i,i->", [u(0), u(0)], "zero-size dot"),
        ("ij,jk->ijk", [u(0, 2), u(2, 3)], "zero-size kept label"),
    ]
    return [Sample((arrays,), {"equation": eq}, f"{eq!r} {label}") for eq, arrays, label in cases]


einsum = defop(
    "einsum",
    family="linalg",
    inputs=("*operands",),
    forward=_einsum,
    joint_vjp=_einsum_vjp,
    check=_check_einsum,
    samples=_einsum_samples,
    torch_ref=lambda torch, operands, equation: torch.einsum(equation, *operands),
    numpy={np.einsum: _numpy.einsum},
)


# -- mm / t: torch's 2-D forms of matmul and transpose (appended) ------------------------------------------------
def _mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise ValueError(
            f"mm: arguments 'input' and 'mat2' expected 2-D tensors, got shapes {input.shape}, {mat2.shape}"
        )
    if input.shape[1] != mat2.shape[0]:
        raise ValueError(
            f"mm: argument 'mat2' expected {input.shape[1]} rows (input is {input.shape}), got {mat2.shape}"
        )
    if input.dtype != mat2.dtype or input.dtype.kind != "f":
        raise TypeError(
            f"mm: arguments 'input' and 'mat2' expected one floating dtype, got {input.dtype}, {mat2.dtype}"
        )
    return np.matmul(input, mat2)


def _mm_samples(rng):
    return [
        Sample((uniform(rng, (2, 3)), uniform(rng, (3, 4))), {}),
        Sample((transposed(rng, (3, 2)), transposed(rng, (2, 5))), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)), uniform(rng, (3, 2))), {}, "zero rows"),
        Sample((uniform(rng, (2, 0)), uniform(rng, (0, 3))), {}, "zero-size contraction"),
    ]


mm = defop(
    "mm",
    family="linalg",
    inputs=("input", "mat2"),
    forward=_mm,
    vjps=(
        lambda g, ans, input, mat2: np.matmul(g, np.swapaxes(mat2, 0, 1)),
        lambda g, ans, input, mat2: np.matmul(np.swapaxes(input, 0, 1), g),
    ),
    samples=_mm_samples,
    torch_ref=lambda torch, input, mat2: torch.mm(input, mat2),
)


def _t(input):
    if input.ndim > 2:
        raise ValueError(f"t: argument 'input' expected a tensor of at most 2 dims, got shape {input.shape}")
    return np.array(input.T)


t = defop(
    "t",
    family="linalg",
    inputs=("input",),
    forward=_t,
    vjps=(lambda g, ans, input: np.transpose(g),),
    samples=lambda rng: [
        Sample((uniform(rng, (2, 3)),), {}),
        Sample((uniform(rng, (4,)),), {}, "1-D"),
        Sample((uniform(rng, ()),), {}, "0-D"),
        Sample((transposed(rng, (3, 2)),), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {}, "zero-size"),
    ],
    torch_ref=lambda torch, input: torch.t(input),
)
__all__ += ["mm", "t"]


# -- ONNX lowerings (tape.onnx.export) -----------------------------------------------------------------------
def _onnx_matmul(g, rec, input, other):
    no_attributes(rec)
    if rec.inputs[0].dtype.kind not in "f":
        raise NotExportable(f"ONNX MatMul on {rec.inputs[0].dtype} has no kernel in ONNX Runtime")
    return g.op("MatMul", input, other)


def _onnx_linear(g, rec, input, weight, bias=None):
    """input @ weight^T + bias."""
    if len(rec.inputs[1].shape) != 2:
        raise NotExportable(f"a {len(rec.inputs[1].shape)}-D weight has no lowering (2-D expected)")
    out = g.op("MatMul", input, g.op("Transpose", weight, perm=[1, 0]))
    return out if bias is None else g.op("Add", out, bias)


def _onnx_t(g, rec, input):
    if len(rec.inputs[0].shape) < 2:
        return g.op("Identity", input)
    return g.op("Transpose", input, perm=list(range(len(rec.inputs[0].shape)))[::-1])


def _onnx_einsum(g, rec, operands):
    equation = rec.attributes["equation"].replace(" ", "")
    if any(0 in s.shape for s in rec.inputs) or "->" not in equation:
        raise NotExportable("an empty operand or an implicit output (no '->') has no lowering")
    terms = equation.split("->")[0].split(",")
    covered = {len(s.shape) - len(t.replace("...", "")) for t, s in zip(terms, rec.inputs, strict=True) if "..." in t}
    if len(covered) > 1:
        raise NotExportable("'...' covering different numbers of dims has no lowering (ONNX's Einsum refuses it)")
    return g.op("Einsum", *operands, equation=equation)


lowering(einsum, _onnx_einsum)
lowering(matmul, _onnx_matmul)
lowering(mm, _onnx_matmul)
lowering(linear, _onnx_linear)
lowering(t, _onnx_t)
