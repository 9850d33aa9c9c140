"""Linear algebra: matmul, linear (x W^T + b) and einsum, each with its VJPs, torch 2.13 semantics.

matmul and linear sit on the training hot path: when a batched operand meets a plain matrix, the batch
dims are folded into the rows so one GEMM does the work (no batched loop and no broadcast-then-sum of
the weight gradient).

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
from tape.registry import NOT_DIFFERENTIABLE, Sample, defop

from . import _numpy
from ._kernels import buffers, runtime
from ._numerics import constant_values, quiet
from ._onnx import NotExportable, cast_to, no_attributes
from ._samples import transposed, uniform
from ._validation import batch_dims_or_fail, broadcast_or_fail, integer, normalize_dim, real, require_float
from .reduce import _norm_of, _norm_vjp_of, vector_norm


def _same_dtype(op: str, names: tuple, arrays) -> None:
    first = arrays[0]
    for name, a in zip(names[1:], arrays[1:]):
        if a is not None and a.dtype != first.dtype:
            if a.dtype.kind == "f":  # an integer input beside a float weight: the input is the one to convert
                require_float(op, names[0], first)
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
    batch_dims_or_fail("matmul", "other", other.shape, other.shape[:-2], "input", input.shape[:-2])
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
    """``a @ b`` for matrices, BLAS single-threaded when the product is small (``runtime.blas_for``); on arrays,
    into one of ``buffers``' reused arrays (a step's products are the same large arrays every step)."""
    with runtime.blas_for(2 * a.shape[0] * a.shape[1] * b.shape[-1]):
        if type(a) is not np.ndarray or type(b) is not np.ndarray:  # Tensors (create_graph): the registered op
            return a @ b
        return np.matmul(a, b, out=buffers.empty((a.shape[0], b.shape[-1]), np.result_type(a, b)))


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
    doc="input @ weight.T + bias: an affine map of the last dim, as torch.nn.functional.linear.",
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
    notes="torch's ``einsum(equation, *operands)`` (the operands may also come as one list): one op with a sequence "
    "input, any number of operands. The VJP is an einsum of the output gradient with the other operands; labels an "
    "operand sums alone are broadcast back, repeated labels ('ii->i', traces) put the gradient on the diagonal (in "
    "place on arrays; as an einsum with a 0/1 delta on Tensors, so it records), and labelled or '...' dims of size 1 "
    "that were broadcast are summed back to size 1.",
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
    method=True,
    family="linalg",
    inputs=("input", "mat2"),
    forward=_mm,
    vjps=(
        lambda g, ans, input, mat2: np.matmul(g, np.swapaxes(mat2, 0, 1)),
        lambda g, ans, input, mat2: np.matmul(np.swapaxes(input, 0, 1), g),
    ),
    samples=_mm_samples,
    torch_ref=lambda torch, input, mat2: torch.mm(input, mat2),
    doc="The matrix product of two 2-D tensors, (n, m) @ (m, p) -> (n, p).",
)


def _t(input):
    if input.ndim > 2:
        raise ValueError(f"t: argument 'input' expected a tensor of at most 2 dims, got shape {input.shape}")
    return np.array(input.T)


t = defop(
    "t",
    method=True,
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
    doc="The transpose of a tensor of at most 2 dims (0-D and 1-D are returned as they are).",
)
__all__ += ["mm", "t"]


# == BLAS-style products, traces, cross products, distances, covariance (torch 2.13 semantics) ==================
def _require_number(op: str, name: str, value) -> None:
    real(op, name, value, "a number")


def _require_ndim(op: str, name: str, a, ndim: int, what: str) -> None:
    if a.ndim != ndim:
        raise ValueError(f"{op}: argument '{name}' expected {what}, got shape {a.shape}")


def _require_float_same(op: str, names: tuple, arrays) -> None:
    _same_dtype(op, names, arrays)
    if arrays[0].dtype.kind != "f":
        raise TypeError(f"{op}: argument '{names[0]}' expected a floating tensor, got dtype {arrays[0].dtype}")


def _scaled(x, factor):
    return x if factor == 1 else x * factor


# -- addmm, addmv, addr, addbmm, baddbmm: beta * input + alpha * product --------------------------------------
def _beta_alpha_sum(input, product, beta, alpha):
    """beta * input + alpha * product; beta = 0 ignores input (NaN and inf in it do not propagate), as torch."""
    out = _scaled(product, alpha)
    if beta == 0:
        return np.array(np.broadcast_to(out, product.shape))
    return out + _scaled(input, beta)


def _check_add_product(op, names, input, a, b, ndims, product_shape, beta, alpha):
    _require_number(op, "beta", beta)
    _require_number(op, "alpha", alpha)
    for name, x, ndim in zip(names[1:], (a, b), ndims):
        _require_ndim(op, name, x, ndim, f"a {ndim}-D tensor")
    _require_float_same(op, names, (input, a, b))
    inner_a, inner_b = a.shape[-1], b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if (op != "addr" and inner_a != inner_b) or (a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"{op}: argument '{names[2]}' of shape {b.shape} does not match '{names[1]}' {a.shape}")
    product_shape = product_shape(a, b)
    broadcast_or_fail(
        op,
        "input",
        (input.shape, product_shape),
        f"a shape broadcastable to the product's {product_shape}",
        input.shape,
        to=product_shape,
    )


def _input_vjp(g, ans, input, a, b, *, beta=1, alpha=1):
    return unbroadcast(_scaled(g, beta), input.shape)


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``torch.addmm``: beta * input + alpha * (mat1 @ mat2), input broadcast to (n, p)."""
    return _beta_alpha_sum(input, np.matmul(mat1, mat2), beta, alpha)


def _addmv(input, mat, vec, *, beta=1, alpha=1):
    """``torch.addmv``: beta * input + alpha * (mat @ vec), input broadcast to (n,)."""
    return _beta_alpha_sum(input, np.matmul(mat, vec), beta, alpha)


def _addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``torch.addr``: beta * input + alpha * outer(vec1, vec2), input broadcast to (n, m)."""
    return _beta_alpha_sum(input, np.multiply.outer(vec1, vec2), beta, alpha)


def _addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``torch.addbmm``: beta * input + alpha * sum_b batch1[b] @ batch2[b], input broadcast to (n, p)."""
    return _beta_alpha_sum(input, np.einsum("bij,bjk->ik", batch1, batch2), beta, alpha)


def _baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``torch.baddbmm``: beta * input + alpha * (batch1 @ batch2), input broadcast to (b, n, p)."""
    return _beta_alpha_sum(input, np.matmul(batch1, batch2), beta, alpha)


def _mT(x):
    return np.swapaxes(x, -1, -2)


_ADD_PRODUCTS = {  # name: (forward, tensor names, operand ndims, sample operand shapes, product shape, vjps of a, b)
    "addmm": (
        _addmm,
        ("input", "mat1", "mat2"),
        (2, 2),
        ((3, 2), (2, 4)),
        lambda a, b: (a.shape[0], b.shape[1]),
        lambda g, a, b: np.matmul(g, _mT(b)),
        lambda g, a, b: np.matmul(_mT(a), g),
    ),
    "addmv": (
        _addmv,
        ("input", "mat", "vec"),
        (2, 1),
        ((3, 2), (2,)),
        lambda a, b: (a.shape[0],),
        lambda g, a, b: np.expand_dims(g, -1) * b,
        lambda g, a, b: np.matmul(g, a),
    ),
    "addr": (
        _addr,
        ("input", "vec1", "vec2"),
        (1, 1),
        ((3,), (4,)),
        lambda a, b: (a.shape[0], b.shape[0]),
        lambda g, a, b: np.matmul(g, b),
        lambda g, a, b: np.matmul(a, g),
    ),
    "addbmm": (
        _addbmm,
        ("input", "batch1", "batch2"),
        (3, 3),
        ((2, 3, 2), (2, 2, 4)),
        lambda a, b: (a.shape[1], b.shape[2]),
        lambda g, a, b: np.matmul(np.expand_dims(g, 0), _mT(b)),
        lambda g, a, b: np.matmul(_mT(a), np.expand_dims(g, 0)),
    ),
    "baddbmm": (
        _baddbmm,
        ("input", "batch1", "batch2"),
        (3, 3),
        ((2, 3, 2), (2, 2, 4)),
        lambda a, b: (a.shape[0], a.shape[1], b.shape[2]),
        lambda g, a, b: np.matmul(g, _mT(b)),
        lambda g, a, b: np.matmul(_mT(a), g),
    ),
}


def _add_product_samples(name):
    _, _, _, (sa, sb), product_shape, _, _ = _ADD_PRODUCTS[name]

    def generate(rng):
        full = product_shape(np.empty(sa), np.empty(sb))
        a, b = uniform(rng, sa), uniform(rng, sb)
        out = [
            Sample((uniform(rng, full), a, b), {}, "defaults"),
            Sample((uniform(rng, full), a, b), {"beta": 0.5, "alpha": -2.0}, "beta=0.5 alpha=-2"),
            Sample((uniform(rng, full[-1:]), a, b), {"beta": 2}, "input broadcast"),
            Sample((uniform(rng, ()), a, b), {"alpha": 0}, "0-D input, alpha=0"),
            Sample((np.full(full, np.nan), a, b), {"beta": 0}, "beta=0 ignores NaN input"),
            Sample((uniform(rng, full), transposed(rng, sa), transposed(rng, sb)), {}, "non-contiguous"),
        ]
        if name != "addr":  # a contraction over no entries: alpha * 0 + beta * input
            zb = (0,) if len(sb) == 1 else sb[:-2] + (0,) + sb[-1:]
            out.append(Sample((uniform(rng, full), uniform(rng, sa[:-1] + (0,)), uniform(rng, zb)), {}, "inner dim 0"))
        rows = len(sa) - 2 if len(sa) >= 2 else 0
        za = sa[:rows] + (0,) + sa[rows + 1 :]
        no_rows = product_shape(np.empty(za), np.empty(sb))
        out.append(Sample((uniform(rng, no_rows[-1:]), uniform(rng, za), b), {}, "no rows"))
        return out

    return generate


def _add_product(name, **declaration):
    forward, names, ndims, _, product_shape, vjp_a, vjp_b = _ADD_PRODUCTS[name]

    def check(input, a, b, *, beta=1, alpha=1):
        _check_add_product(name, names, input, a, b, ndims, product_shape, beta, alpha)

    def rule_a(g, ans, input, a, b, *, beta=1, alpha=1):
        return vjp_a(_scaled(g, alpha), a, b)

    def rule_b(g, ans, input, a, b, *, beta=1, alpha=1):
        return vjp_b(_scaled(g, alpha), a, b)

    def torch_ref(torch, input, a, b, beta=1, alpha=1):
        return getattr(torch, name)(input, a, b, beta=beta, alpha=alpha)

    return defop(
        name,
        family="linalg",
        inputs=names,
        forward=forward,
        vjps=(_input_vjp, rule_a, rule_b),
        check=check,
        samples=_add_product_samples(name),
        torch_ref=torch_ref,
        **declaration,
    )


addmm = _add_product("addmm", method=True)
addmv = _add_product("addmv", method=True)
addr = _add_product("addr", method=True)
addbmm = _add_product("addbmm", method=True)
baddbmm = _add_product("baddbmm", method=True)
__all__ += ["addmm", "addmv", "addr", "addbmm", "baddbmm"]


# -- mv, vdot, inner --------------------------------------------------------------------------------------------
def _check_mv(input, vec):
    _require_ndim("mv", "input", input, 2, "a 2-D tensor (n, m)")
    _require_ndim("mv", "vec", vec, 1, f"a 1-D tensor of {input.shape[1]} elements")
    if vec.shape[0] != input.shape[1]:
        raise ValueError(
            f"mv: argument 'vec' expected {input.shape[1]} elements (input {input.shape}), got {vec.shape}"
        )
    _require_float_same("mv", ("input", "vec"), (input, vec))


mv = defop(
    "mv",
    family="linalg",
    inputs=("input", "vec"),
    forward=lambda input, vec: np.matmul(input, vec),
    vjps=(lambda g, ans, input, vec: np.expand_dims(g, -1) * vec, lambda g, ans, input, vec: np.matmul(g, input)),
    check=_check_mv,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)), uniform(rng, (4,))), {}),
        Sample((transposed(rng, (3, 4)), uniform(rng, (8,))[::2]), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 4)), uniform(rng, (4,))), {}, "no rows"),
        Sample((uniform(rng, (3, 0)), uniform(rng, (0,))), {}, "inner dim 0: zeros"),
    ],
    torch_ref=lambda torch, input, vec: torch.mv(input, vec),
    method=True,
    doc="The matrix-vector product of an (n, m) matrix and an (m,) vector.",
)


def _check_vdot(input, other):
    _require_ndim("vdot", "input", input, 1, "a 1-D tensor")
    _require_ndim("vdot", "other", other, 1, f"a 1-D tensor of {input.shape[0]} elements")
    if other.shape != input.shape:
        raise ValueError(f"vdot: argument 'other' expected {input.shape[0]} elements (as input), got {other.shape}")
    _require_float_same("vdot", ("input", "other"), (input, other))


vdot = defop(
    "vdot",
    family="linalg",
    inputs=("input", "other"),
    forward=lambda input, other: np.asarray(np.dot(input, other)),  # real tensors: no conjugate
    vjps=(lambda g, ans, input, other: g * other, lambda g, ans, input, other: g * input),
    check=_check_vdot,
    samples=lambda rng: [
        Sample((uniform(rng, (5,)), uniform(rng, (5,))), {}),
        Sample((uniform(rng, (8,))[::2], uniform(rng, (4,))[::-1]), {}, "non-contiguous"),
        Sample((uniform(rng, (0,)), uniform(rng, (0,))), {}, "zero-size: 0"),
    ],
    torch_ref=lambda torch, input, other: torch.vdot(input, other),
    method=True,
    doc="The dot product of two 1-D tensors of the same length, as a 0-D tensor.",
)


def _check_inner(input, other):
    _require_float_same("inner", ("input", "other"), (input, other))
    if input.ndim and other.ndim and input.shape[-1] != other.shape[-1]:
        raise ValueError(
            f"inner: argument 'other' expected last dim {input.shape[-1]} (input {input.shape}), got {other.shape}"
        )


def _inner_labels(input, other):
    a = _LABELS[: input.ndim - 1]
    b = _LABELS[input.ndim - 1 : input.ndim + other.ndim - 2]
    return a, b, "z"  # z: the contracted last dim (a and b use at most 24 labels before it)


def _inner(input, other):
    """``torch.inner``: the dot product over the last dims, out shape input.shape[:-1] + other.shape[:-1]; a
    0-D operand multiplies."""
    if input.ndim == 0 or other.ndim == 0:
        return np.multiply(input, other)
    a, b, k = _inner_labels(input, other)
    return np.asarray(np.einsum(f"{a}{k},{b}{k}->{a}{b}", input, other))


def _inner_vjp_input(g, ans, input, other):
    if input.ndim == 0 or other.ndim == 0:
        return unbroadcast(g * other, input.shape)
    a, b, k = _inner_labels(input, other)
    return np.einsum(f"{a}{b},{b}{k}->{a}{k}", g, other)


def _inner_vjp_other(g, ans, input, other):
    if input.ndim == 0 or other.ndim == 0:
        return unbroadcast(g * input, other.shape)
    a, b, k = _inner_labels(input, other)
    return np.einsum(f"{a}{b},{a}{k}->{b}{k}", g, input)


inner = defop(
    "inner",
    family="linalg",
    inputs=("input", "other"),
    forward=_inner,
    vjps=(_inner_vjp_input, _inner_vjp_other),
    check=_check_inner,
    samples=lambda rng: [
        Sample((uniform(rng, (4,)), uniform(rng, (4,))), {}, "vectors"),
        Sample((uniform(rng, (2, 3, 4)), uniform(rng, (5, 4))), {}, "(2, 3, 4) with (5, 4)"),
        Sample((uniform(rng, (3,)), uniform(rng, (2, 3))), {}, "vector with matrix"),
        Sample((uniform(rng, ()), uniform(rng, (2, 3))), {}, "0-D: a product"),
        Sample((uniform(rng, (2, 3)), uniform(rng, ())), {}, "0-D other"),
        Sample((transposed(rng, (3, 4)), transposed(rng, (2, 4))), {}, "non-contiguous"),
        Sample((uniform(rng, (2, 0)), uniform(rng, (3, 0))), {}, "contracted dim 0: zeros"),
        Sample((uniform(rng, (0, 3)), uniform(rng, (2, 3))), {}, "no rows"),
    ],
    torch_ref=lambda torch, input, other: torch.inner(input, other),
    method=True,
)


# -- multi_dot (torch.linalg.multi_dot), chain_matmul --------------------------------------------------------------
def _check_chain(op, tensors, vectors_at_ends):
    if len(tensors) < (2 if vectors_at_ends else 1):
        raise ValueError(
            f"{op}: argument 'tensors' expected at least {2 if vectors_at_ends else 1}, got {len(tensors)}"
        )
    for k, t in enumerate(tensors):
        ends = vectors_at_ends and k in (0, len(tensors) - 1)
        if t.ndim != 2 and not (ends and t.ndim == 1):
            raise ValueError(
                f"{op}: argument 'tensors[{k}]' expected a 2-D tensor{' (or 1-D: first or last)' if ends else ''}, "
                f"got shape {t.shape}"
            )
    _require_float_same(op, tuple(f"tensors[{k}]" for k in range(len(tensors))), tensors)
    mats = _as_chain_matrices(tensors)
    for k in range(1, len(mats)):
        if mats[k].shape[0] != mats[k - 1].shape[1]:
            raise ValueError(
                f"{op}: argument 'tensors[{k}]' expected {mats[k - 1].shape[1]} rows to follow tensors[{k - 1}] "
                f"{tensors[k - 1].shape}, got shape {tensors[k].shape}"
            )


def _as_chain_matrices(tensors):
    """The chain as matrices: a 1-D first operand a row, a 1-D last one a column (multi_dot's rule)."""
    mats = list(tensors)
    if mats[0].ndim == 1:
        mats[0] = np.reshape(mats[0], (1, -1))
    if len(mats) > 1 and mats[-1].ndim == 1:
        mats[-1] = np.reshape(mats[-1], (-1, 1))
    return mats


def _chain_product(mats):
    return np.linalg.multi_dot(mats) if len(mats) > 2 else (mats[0] if len(mats) == 1 else mats[0] @ mats[1])


def _chain_vjp(g, tensors):
    """d/dA_k of <g, A_0 ... A_n> = (A_0 ... A_k-1)^T g (A_k+1 ... A_n)^T, for each k (prefix and suffix products)."""
    mats = _as_chain_matrices(tensors)
    g = np.reshape(g, (mats[0].shape[0], mats[-1].shape[1]))
    left = [g]  # left[k] = g (A_k+1 ... A_n)^T, built from the right
    for mat in mats[:0:-1]:
        left.append(np.matmul(left[-1], _mT(mat)))
    left.reverse()
    grads, prefix = [], None  # prefix = A_0 ... A_k-1
    for k in range(len(mats)):
        grad = left[k] if prefix is None else np.matmul(_mT(prefix), left[k])
        grads.append(np.reshape(grad, tensors[k].shape))
        prefix = mats[k] if prefix is None else np.matmul(prefix, mats[k])
    return grads


def _multi_dot(tensors):
    """``torch.linalg.multi_dot(tensors)``: the product in the cheapest order (numpy's multi_dot); a 1-D first
    (last) operand is a row (column) vector, dropped from the result's shape."""
    _check_chain("multi_dot", tensors, True)
    out = _chain_product(_as_chain_matrices(tensors))
    shape = tensors[0].shape[:-1] + tensors[-1].shape[1:]
    return np.reshape(out, shape)


def _chain_samples(vectors_at_ends):
    def generate(rng):
        def u(*shape):
            return uniform(rng, shape)

        out = [
            Sample(([u(2, 3), u(3, 4)],), {}, "2 matrices"),
            Sample(([u(2, 3), u(3, 1), u(1, 4), u(4, 2)],), {}, "4 matrices"),
            Sample(([transposed(rng, (3, 2)), u(2, 2), transposed(rng, (2, 3))],), {}, "non-contiguous"),
            Sample(([u(2, 0), u(0, 3), u(3, 2)],), {}, "inner dim 0: zeros"),
            Sample(([u(0, 2), u(2, 3)],), {}, "no rows"),
        ]
        if vectors_at_ends:
            out += [
                Sample(([u(3), u(3, 4), u(4, 2)],), {}, "first 1-D"),
                Sample(([u(2, 3), u(3, 4), u(4)],), {}, "last 1-D"),
                Sample(([u(3), u(3, 2), u(2)],), {}, "both 1-D: 0-D"),
                Sample(([u(3), u(3)],), {}, "two vectors"),
            ]
        return out

    return generate


multi_dot = defop(
    "multi_dot",
    family="linalg",
    inputs=("*tensors",),
    forward=_multi_dot,
    vjps=(lambda g, ans, tensors: _chain_vjp(g, tensors),),
    samples=_chain_samples(True),
    torch_ref=lambda torch, tensors: torch.linalg.multi_dot(tensors),
)


def _chain_matmul(*matrices):
    """``torch.chain_matmul(*matrices)`` (deprecated in torch for linalg.multi_dot): 2-D matrices only."""
    _check_chain("chain_matmul", matrices, False)
    return np.array(_chain_product(list(matrices)))


chain_matmul = defop(
    "chain_matmul",
    family="linalg",
    inputs=("*matrices",),
    forward=_chain_matmul,
    vjps=(lambda g, ans, matrices: _chain_vjp(g, matrices),),
    samples=_chain_samples(False),
    torch_ref=lambda torch, matrices: torch.chain_matmul(*matrices),
)


# -- trace -------------------------------------------------------------------------------------------------------
def _trace(input):
    """``torch.trace``: the sum of a 2-D tensor's diagonal (any shape, square or not)."""
    _require_ndim("trace", "input", input, 2, "a 2-D tensor")
    return np.asarray(np.trace(input))


trace = defop(
    "trace",
    family="linalg",
    inputs=("input",),
    forward=_trace,
    vjps=(lambda g, ans, input: g * np.eye(input.shape[0], input.shape[1], dtype=input.dtype),),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 3)),), {}, "square"),
        Sample((uniform(rng, (2, 4)),), {}, "wide"),
        Sample((transposed(rng, (4, 2)),), {}, "non-contiguous tall"),
        Sample((uniform(rng, (0, 3)),), {}, "zero-size: 0"),
    ],
    torch_ref=lambda torch, input: torch.trace(input),
    method=True,
)
__all__ += ["mv", "vdot", "inner", "multi_dot", "chain_matmul", "trace"]


# -- cross (torch.cross), linalg_cross (torch.linalg.cross) ------------------------------------------------------
def _check_cross(op, input, other, dim):
    _require_float_same(op, ("input", "other"), (input, other))
    if input.ndim != other.ndim:
        raise ValueError(
            f"{op}: argument 'other' expected {input.ndim} dims (as input {input.shape}), got {other.shape}"
        )
    broadcast_or_fail(
        op, "other", (input.shape, other.shape), f"a shape broadcastable with input {input.shape}", other.shape
    )
    if dim is None:
        if 3 not in input.shape:
            raise ValueError(f"{op}: argument 'input' expected a dim of size 3 (dim=None), got shape {input.shape}")
        return input.shape.index(3)
    axis = normalize_dim(op, dim, input.ndim)
    if input.shape[axis] != 3 or other.shape[axis] != 3:
        raise ValueError(
            f"{op}: arguments 'input' and 'other' expected size 3 at dim {dim}, got shapes {input.shape}, {other.shape}"
        )
    return axis


def _cross_of(a, b, axis):
    """a x b along ``axis``: numpy's on arrays, the linalg_cross op on Tensors (recorded)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.cross(a, b, axis=axis)
    return linalg_cross(a, b, dim=axis)


def _cross_rules(op):
    """d(a x b) . g: a gets b x g, b gets g x a (summed back over broadcast dims)."""

    def for_input(g, ans, input, other, dim=None):
        axis = _check_cross(op, input, other, dim)
        return unbroadcast(_cross_of(np.broadcast_to(other, g.shape), g, axis), input.shape)

    def for_other(g, ans, input, other, dim=None):
        axis = _check_cross(op, input, other, dim)
        return unbroadcast(_cross_of(g, np.broadcast_to(input, g.shape), axis), other.shape)

    return for_input, for_other


def _cross_samples(default_dim):
    def generate(rng):
        def u(*shape):
            return uniform(rng, shape)

        out = [
            Sample((u(4, 3), u(4, 3)), {"dim": 1}, "dim=1"),
            Sample((u(3, 4), u(3, 4)), {"dim": 0}, "dim=0"),
            Sample((u(2, 1, 3), u(1, 4, 3)), {"dim": -1}, "broadcast"),
            Sample((transposed(rng, (2, 3)), transposed(rng, (2, 3))), {"dim": 1}, "non-contiguous"),
            Sample((u(0, 3), u(0, 3)), {"dim": 1}, "zero-size"),
            Sample(
                (
                    u(
                        3,
                    ),
                    u(
                        3,
                    ),
                ),
                {"dim": 0},
                "vectors",
            ),
        ]
        if default_dim is None:
            out.append(Sample((u(2, 3, 3), u(2, 3, 3)), {}, "dim=None: the first dim of size 3"))
        else:
            out.append(Sample((u(2, 3, 3), u(2, 3, 3)), {}, "dim=-1 default"))
        return out

    return generate


def _cross(input, other, dim=None):
    """``torch.cross(input, other, dim=None)``: dim=None takes input's first dim of size 3 (torch's deprecated
    default; torch warns, minitape does not)."""
    return np.cross(input, other, axis=_check_cross("cross", input, other, dim))


def _linalg_cross(input, other, *, dim=-1):
    """``torch.linalg.cross(input, other, *, dim=-1)``: both of the same rank, broadcast, size 3 at dim."""
    return np.cross(input, other, axis=_check_cross("linalg_cross", input, other, dim))


def _torch_cross(torch, input, other, dim=None):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch warns on its deprecated dim=None
        return torch.cross(input, other, dim=dim)


cross = defop(
    "cross",
    family="linalg",
    inputs=("input", "other"),
    forward=_cross,
    vjps=_cross_rules("cross"),
    samples=_cross_samples(None),
    torch_ref=_torch_cross,
    method=True,
)
linalg_cross = defop(
    "linalg_cross",
    family="linalg",
    inputs=("input", "other"),
    forward=_linalg_cross,
    vjps=_cross_rules("linalg_cross"),
    samples=_cross_samples(-1),
    torch_ref=lambda torch, input, other, dim=-1: torch.linalg.cross(input, other, dim=dim),
)


# -- cdist, pdist, dist: p-norms of differences ------------------------------------------------------------------
def _check_p(op, p, allow_negative=False):
    _require_number(op, "p", p)
    if not (p >= 0 or (allow_negative and not np.isnan(p))):
        raise ValueError(f"{op}: argument 'p' expected a number >= 0, got {p!r}")


def _pair_vjp(op, g, dist, diff, p):
    """The gradient of ||diff||_p over the last dim. p = inf: every entry of extreme magnitude gets the whole
    gradient with its sign (torch's cdist / pdist kernel); otherwise vector_norm's rule (0 at distance 0)."""
    if p == math.inf:
        g_kept, dist_kept = np.expand_dims(g, -1), np.expand_dims(dist, -1)
        return np.sign(diff) * (np.abs(diff) == dist_kept) * g_kept
    return _norm_vjp_of(op, g, dist, diff, p, -1, False)


def _check_cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    _check_p("cdist", p)
    _require_float_same("cdist", ("x1", "x2"), (x1, x2))
    for name, x in (("x1", x1), ("x2", x2)):
        if x.ndim < 2:
            raise ValueError(f"cdist: argument '{name}' expected at least 2 dims (*, rows, M), got shape {x.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: argument 'x2' expected last dim {x1.shape[-1]} (as x1 {x1.shape}), got {x2.shape}")
    batch_dims_or_fail("cdist", "x2", x2.shape, x2.shape[:-2], "x1", x1.shape[:-2])
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"cdist: argument 'compute_mode' expected one of {modes}, got {compute_mode!r}")


def _cdist_diff(x1, x2):
    return np.expand_dims(x1, -2) - np.expand_dims(x2, -3)  # (*, P, R, M)


def _cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """``torch.cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary")``: (*, P, M), (*, R, M)
    -> (*, P, R), batch dims broadcast.
    Always the direct difference (compute_mode is accepted; torch's matmul form for p = 2 only rounds differently)."""
    _check_cdist(x1, x2, p, compute_mode)
    return _norm_of("cdist", _cdist_diff(x1, x2), p, -1, False)


def _cdist_vjp_x1(g, ans, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    return unbroadcast(np.sum(_pair_vjp("cdist", g, ans, _cdist_diff(x1, x2), p), axis=-2), x1.shape)


def _cdist_vjp_x2(g, ans, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    return unbroadcast(-np.sum(_pair_vjp("cdist", g, ans, _cdist_diff(x1, x2), p), axis=-3), x2.shape)


def _cdist_samples(rng):
    def u(*shape):
        return uniform(rng, shape)

    out = [Sample((u(3, 2), u(4, 2)), {"p": p}, f"p={p}") for p in (2.0, 1.0, 0.0, math.inf, 3.0, 0.5)]
    # zero distance (a cone's tip: no second derivative, so not a sample here): tests/ops/test_linalg_products.py
    out += [
        Sample((u(2, 1, 3, 2), u(4, 2, 2)), {}, "batch broadcast"),
        Sample((transposed(rng, (3, 2)), transposed(rng, (2, 2))), {"p": 1.5}, "non-contiguous, p=1.5"),
        Sample((u(0, 2), u(3, 2)), {}, "no rows"),
        Sample((u(2, 0), u(3, 0)), {}, "M=0: zeros"),
    ]
    return out


cdist = defop(
    "cdist",
    family="linalg",
    inputs=("x1", "x2"),
    forward=_cdist,
    vjps=(_cdist_vjp_x1, _cdist_vjp_x2),
    samples=_cdist_samples,
    torch_ref=lambda torch, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary": torch.cdist(
        x1, x2, p=p, compute_mode=compute_mode
    ),
)


def _pairs(n, dtype):
    """(n (n - 1) / 2, n) incidence: row k has +1 at i and -1 at j for the k-th pair i < j (pdist's order)."""
    i, j = np.triu_indices(n, 1)
    e = np.zeros((i.size, n), dtype)
    e[np.arange(i.size), i] = 1
    e[np.arange(i.size), j] = -1
    return e


def _check_pdist(input, p):
    _check_p("pdist", p)
    _require_ndim("pdist", "input", input, 2, "a 2-D tensor (N, M)")
    if input.dtype.kind != "f":
        raise TypeError(f"pdist: argument 'input' expected a floating tensor, got dtype {input.dtype}")


def _pdist(input, p=2.0):
    """``torch.pdist(input, p=2)``: the distances between rows i < j of (N, M), in row-major pair order."""
    _check_pdist(input, p)
    return _norm_of("pdist", _pairs(input.shape[0], input.dtype) @ input, p, -1, False)


def _pdist_vjp(g, ans, input, p=2.0):
    e = _pairs(input.shape[0], input.dtype)
    return np.matmul(_mT(e), _pair_vjp("pdist", g, ans, np.matmul(e, input), p))


pdist = defop(
    "pdist",
    family="linalg",
    inputs=("input",),
    forward=_pdist,
    vjps=(_pdist_vjp,),
    samples=lambda rng: [
        *[Sample((uniform(rng, (4, 3)),), {"p": p}, f"p={p}") for p in (2.0, 1.0, 0.0, math.inf, 3.0, 0.5)],
        Sample((transposed(rng, (3, 5)),), {}, "non-contiguous"),
        Sample((uniform(rng, (1, 3)),), {}, "one row: no pairs"),
        Sample((uniform(rng, (3, 0)),), {}, "M=0: zeros"),
    ],
    torch_ref=lambda torch, input, p=2.0: torch.pdist(input, p=p),
)


def _check_dist(input, other, p):
    _require_number("dist", "p", p)
    _require_float_same("dist", ("input", "other"), (input, other))
    broadcast_or_fail(
        "dist", "other", (input.shape, other.shape), f"a shape broadcastable with input {input.shape}", other.shape
    )


def _dist(input, other, p=2):
    """``torch.dist(input, other, p=2)``: the p-norm of input - other (broadcast), every entry (0-D)."""
    _check_dist(input, other, p)
    return _norm_of("dist", input - other, p, None, False)


def _dist_grad(g, ans, input, other, p):
    return _norm_vjp_of("dist", g, ans, np.subtract(input, other), p, None, False)


dist = defop(
    "dist",
    family="linalg",
    inputs=("input", "other"),
    forward=_dist,
    vjps=(
        lambda g, ans, input, other, p=2: unbroadcast(_dist_grad(g, ans, input, other, p), input.shape),
        lambda g, ans, input, other, p=2: unbroadcast(-_dist_grad(g, ans, input, other, p), other.shape),
    ),
    samples=lambda rng: [
        # torch's backward of p=0 fails (its norm backward returns no tensor): no torch comparison there
        *[
            Sample((uniform(rng, (2, 3)), uniform(rng, (3,))), {"p": p}, f"p={p}", torch=p != 0)
            for p in (2, 1, 0, math.inf, 3, 0.5)
        ],
        Sample((uniform(rng, (2, 3)), uniform(rng, (2, 1))), {"p": -math.inf}, "p=-inf"),
        Sample((transposed(rng, (3, 2)), uniform(rng, ())), {}, "non-contiguous, 0-D other"),
        Sample((uniform(rng, (0, 3)), uniform(rng, (3,))), {}, "zero-size: 0"),
    ],
    torch_ref=lambda torch, input, other, p=2: torch.dist(input, other, p=p),
    method=True,
)


# -- renorm ------------------------------------------------------------------------------------------------------
_RENORM_EPS = 1e-7  # torch's: maxnorm / (norm + 1e-7)


def _renorm_axes(input, dim):
    axis = normalize_dim("renorm", dim, input.ndim)
    return tuple(a for a in range(input.ndim) if a != axis)


def _check_renorm(input, p, dim, maxnorm):
    _require_number("renorm", "p", p)
    _require_number("renorm", "maxnorm", maxnorm)
    if not p > 0:
        raise ValueError(f"renorm: argument 'p' expected a number > 0, got {p!r}")
    if not maxnorm >= 0:
        raise ValueError(f"renorm: argument 'maxnorm' expected a number >= 0, got {maxnorm!r}")
    if input.ndim < 2 or input.dtype.kind != "f":
        raise ValueError(f"renorm: argument 'input' expected a floating tensor of at least 2 dims, got {input.shape}")
    _renorm_axes(input, dim)


def _renorm_parts(input, p, dim, maxnorm):
    """(norms of the sub-tensors along dim, kept dims; the scale; where it applies): norm > maxnorm."""
    axes = _renorm_axes(input, dim)
    norms = (
        _norm_of("renorm", input, p, axes, True) if isinstance(input, np.ndarray) else vector_norm(input, p, axes, True)
    )
    over = np.asarray(constant_values(norms) > maxnorm)
    scale = np.where(over, maxnorm / (norms + _RENORM_EPS), 1.0)
    return axes, norms, scale, over


def _renorm(input, p, dim, maxnorm):
    """``torch.renorm(input, p, dim, maxnorm)``: each sub-tensor input.select(dim, i) whose p-norm exceeds maxnorm
    scaled by maxnorm / (norm + 1e-7) (torch's)."""
    _check_renorm(input, p, dim, maxnorm)
    return input * _renorm_parts(input, p, dim, maxnorm)[2]


@quiet
def _renorm_vjp(g, ans, input, p, dim, maxnorm):
    """out = x s(||x||), s = maxnorm / (||x|| + eps) where ||x|| > maxnorm: g s + (d||x||/dx) sum(g x) s'(||x||)."""
    axes, norms, scale, over = _renorm_parts(input, p, dim, maxnorm)
    through_norm = np.sum(g * input, axis=axes, keepdims=True) * np.where(
        over, -maxnorm / np.square(norms + _RENORM_EPS), 0.0
    )
    return g * scale + _norm_vjp_of("renorm", through_norm, norms, input, p, axes, True)


renorm = defop(
    "renorm",
    family="linalg",
    inputs=("input",),
    forward=_renorm,
    vjps=(_renorm_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)),), {"p": 2, "dim": 0, "maxnorm": 1.5}, "p=2 rows, some scaled"),
        Sample((uniform(rng, (2, 3, 2)),), {"p": 1, "dim": 1, "maxnorm": 2.0}, "p=1 dim=1"),
        Sample((uniform(rng, (3, 4)),), {"p": 3.0, "dim": -1, "maxnorm": 1.0}, "p=3 dim=-1"),
        Sample((uniform(rng, (3, 4)),), {"p": math.inf, "dim": 0, "maxnorm": 1.0}, "p=inf"),
        Sample((uniform(rng, (3, 4)),), {"p": 2, "dim": 0, "maxnorm": 100.0}, "none scaled"),
        Sample((uniform(rng, (3, 4)),), {"p": 2, "dim": 0, "maxnorm": 0.0}, "maxnorm=0"),
        Sample((transposed(rng, (4, 3)),), {"p": 2, "dim": 1, "maxnorm": 1.0}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {"p": 2, "dim": 1, "maxnorm": 1.0}, "zero-size"),
    ],
    torch_ref=lambda torch, input, p, dim, maxnorm: torch.renorm(input, p, dim, maxnorm),
    method=True,
)
__all__ += ["cross", "linalg_cross", "cdist", "pdist", "dist", "renorm"]


# -- cov, corrcoef -----------------------------------------------------------------------------------------------
def _check_cov(input, fweights=None, aweights=None, *, correction=1):
    integer("cov", "correction", correction)
    if input.ndim > 2 or input.dtype.kind != "f":
        raise ValueError(
            f"cov: argument 'input' expected a floating tensor of at most 2 dims, got {input.dtype} {input.shape}"
        )
    n = input.shape[-1] if input.ndim else 1
    for name, w, kinds in (("fweights", fweights, "iu"), ("aweights", aweights, "f")):
        if w is None:
            continue
        if w.ndim > 1 or w.size != n or w.dtype.kind not in kinds:
            raise ValueError(
                f"cov: argument '{name}' expected a 1-D {'integer' if kinds == 'iu' else 'floating'} tensor of {n} "
                f"observations, got {w.dtype} {w.shape}"
            )
        if np.any(w < 0):
            raise ValueError(f"cov: argument '{name}' expected non-negative weights, got {w}")


def _cov_parts(input, fweights, aweights, correction):
    """(centred observations (vars, obs), weights or None, torch's normalisation max(0, N - correction ...))."""
    x = np.reshape(input, (1, -1)) if input.ndim < 2 else input
    fweights, aweights = (None if w is None else _values_of(w) for w in (fweights, aweights))  # constants
    w = None if fweights is None else fweights.astype(x.dtype)
    if aweights is not None:
        w = aweights if w is None else w * aweights
    n_obs = x.shape[1]
    w_sum = n_obs if w is None else np.sum(w)
    mean = np.mean(x, axis=1, keepdims=True) if w is None else np.sum(x * w, axis=1, keepdims=True) / w_sum
    if w is None or correction == 0 or aweights is None:
        factor = w_sum - correction
    else:
        factor = w_sum - correction * np.sum(w * aweights) / w_sum
    return x - mean, w, max(float(factor), 0.0)


def _values_of(x):
    return constant_values(x)


@quiet  # a normalisation of 0: inf/NaN as torch's
def _cov(input, fweights=None, aweights=None, *, correction=1):
    """``torch.cov(input, *, correction=1, fweights=None, aweights=None)``: rows are variables, columns
    observations; one variable gives a 0-D result."""
    _check_cov(input, fweights, aweights, correction=correction)
    xc, w, factor = _cov_parts(input, fweights, aweights, correction)
    weighted = xc if w is None else xc * w
    return np.squeeze(np.matmul(xc, _mT(weighted)) / factor)


@quiet
def _cov_grad(g, input, fweights, aweights, correction):
    """c = Xc W Xc^T / f, Xc = X - mean: gX = (g + g^T) Xc W / f (Xc w = 0, so the mean's part vanishes)."""
    xc, w, factor = _cov_parts(input, fweights, aweights, correction)
    n_vars = xc.shape[0]
    g = np.reshape(g, (n_vars, n_vars))
    weighted = xc if w is None else xc * w
    return np.reshape(np.matmul(g + _mT(g), weighted) / factor, input.shape)


cov = defop(
    "cov",
    method=True,
    family="linalg",
    inputs=("input", "fweights?", "aweights?"),
    forward=_cov,
    vjps=(
        lambda g, ans, input, fweights, aweights, correction=1: _cov_grad(g, input, fweights, aweights, correction),
        NOT_DIFFERENTIABLE,
        NOT_DIFFERENTIABLE,
    ),
    notes="aweights is not differentiable here (torch's is): a tensor requiring grad there is refused",
    samples=lambda rng: [
        Sample((uniform(rng, (3, 5)), None, None), {}, "3 variables"),
        Sample((uniform(rng, (3, 5)), None, None), {"correction": 0}, "correction=0"),
        Sample((uniform(rng, (2, 4)), None, None), {"correction": 2}, "correction=2"),
        Sample((uniform(rng, (5,)), None, None), {}, "1-D: 0-D variance"),
        Sample((uniform(rng, (2, 4)), rng.integers(0, 3, 4), None), {}, "fweights"),
        Sample((uniform(rng, (2, 4)), None, uniform(rng, (4,), 0.1, 1.0)), {}, "aweights"),
        Sample((uniform(rng, (2, 4)), rng.integers(1, 3, 4), uniform(rng, (4,), 0.1, 1.0)), {}, "both weights"),
        Sample((transposed(rng, (3, 4)), None, None), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 4)), None, None), {}, "no variables"),
    ],
    torch_ref=lambda torch, input, fweights=None, aweights=None, correction=1: torch.cov(
        input, correction=correction, fweights=fweights, aweights=aweights
    ),
)


@quiet
def _corrcoef_parts(input):
    c = _cov(input) if isinstance(input, np.ndarray) else cov(input)
    d = np.sqrt(np.diagonal(np.reshape(c, (-1, 1)) if np.ndim(c) == 0 else c))
    return c, d


@quiet
def _corrcoef(input):
    """``torch.corrcoef(input)``: the Pearson coefficients cov / (sd_i sd_j), clipped to [-1, 1]; one variable
    gives c / c (1, or NaN for a constant)."""
    if input.ndim > 2 or input.dtype.kind != "f":
        raise ValueError(f"corrcoef: argument 'input' expected a floating tensor of at most 2 dims, got {input.shape}")
    c, d = _corrcoef_parts(input)
    if c.ndim == 0:
        return c / c
    return np.clip(c / d[:, None] / d[None, :], -1, 1)


@quiet
def _corrcoef_vjp(g, ans, input):
    """R = C / (s s^T), s = sqrt(diag C): gC = gR / (s s^T), and diag gC -= rowsum + colsum of gR R over 2 s^2.
    Entries torch's clip moved (|R| > 1 by rounding) get no gradient, as torch's."""
    c, d = _corrcoef_parts(input)
    if np.ndim(c) == 0:
        return np.zeros(input.shape, input.dtype)
    outer = d[:, None] * d[None, :]
    r = c / outer
    g = np.where(np.abs(_values_of(r)) <= 1, g, 0)
    gr_r = g * r
    diag = (np.sum(gr_r, axis=1) + np.sum(gr_r, axis=0)) / (2 * d * d)
    gc = g / outer - diag[:, None] * np.eye(d.shape[0], dtype=input.dtype)
    return _cov_grad(gc, input, None, None, 1)


corrcoef = defop(
    "corrcoef",
    method=True,
    family="linalg",
    inputs=("input",),
    forward=_corrcoef,
    vjps=(_corrcoef_vjp,),
    samples=lambda rng: [
        Sample((uniform(rng, (3, 5)),), {}, "3 variables"),
        Sample((uniform(rng, (5,)),), {}, "1-D: 1"),
        Sample((transposed(rng, (2, 4)),), {}, "non-contiguous"),
        Sample((uniform(rng, (0, 3)),), {}, "no variables"),
    ],
    torch_ref=lambda torch, input: torch.corrcoef(input),
)
__all__ += ["cov", "corrcoef"]


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
    summed = _product_sum_axes(equation, [s.shape for s in rec.inputs])
    if summed is None or rec.output.dtype.kind != "f":
        return g.op("Einsum", *operands, equation=equation)
    product = functools.reduce(lambda a, b: g.op("Mul", a, b), operands)
    return g.op("ReduceSum", product, g.ints(summed), keepdims=0) if summed else g.op("Identity", product)


def _product_sum_axes(equation: str, shapes) -> list[int] | None:
    """The axes an einsum sums when it is an elementwise product summed over some axes ('...i,...i->...', row sums:
    every operand with the same subscripts and shape, the output those subscripts in order minus the summed ones),
    else None. ONNX Runtime's Einsum runs such a contraction ~10x slower than Mul and ReduceSum (the attention
    backward's rowsum(dO * O) took 0.43 ms of the tiny GPT's step)."""
    plan = _plan(equation, tuple(shapes))  # '...' resolved to explicit labels
    labels, kept = plan.terms[0], plan.output
    if len(set(plan.terms)) != 1 or len(set(shapes)) != 1 or len(set(labels)) != len(labels):
        return None
    if [c for c in labels if c in kept] != list(kept):
        return None
    return [i for i, c in enumerate(labels) if c not in kept]


lowering(einsum, _onnx_einsum)
lowering(matmul, _onnx_matmul)
lowering(mm, _onnx_matmul)
lowering(linear, _onnx_linear)
lowering(t, _onnx_t)


def _onnx_add_product(g, rec, input, a, b):
    """addmm / addmv / addr / addbmm / baddbmm: alpha * product + beta * input, as _beta_alpha_sum (the product
    a MatMul, addr's an outer Mul, addbmm's the forward's einsum)."""
    attrs = rec.attributes
    beta, alpha = attrs.get("beta", 1), attrs.get("alpha", 1)
    dtype = rec.inputs[0].dtype
    if beta == 0:
        raise NotExportable("beta=0 ignores input (and the export refuses an input no op reads)")
    if rec.op_name == "addr":
        product = g.op("Mul", g.op("Unsqueeze", a, g.ints([1])), b)
    elif rec.op_name == "addbmm":
        if any(0 in s.shape for s in rec.inputs[1:]):  # ONNX Runtime's Einsum dies (SIGFPE) on an empty operand
            raise NotExportable("an empty batch has no lowering")
        product = g.op("Einsum", a, b, equation="bij,bjk->ik")
    else:
        product = g.op("MatMul", a, b)
    if alpha != 1:
        product = g.op("Mul", product, g.const(np.array(alpha, dtype)))
    scaled = input if beta == 1 else g.op("Mul", input, g.const(np.array(beta, dtype)))
    return g.op("Add", product, scaled)


def _onnx_inner(g, rec, input, other):
    """The forward's einsum over the last dims (a 0-D operand multiplies)."""
    shapes = [s.shape for s in rec.inputs]
    if not shapes[0] or not shapes[1]:
        return g.op("Mul", input, other)
    if any(0 in s for s in shapes):  # ONNX Runtime's Einsum dies (SIGFPE) on an empty operand
        raise NotExportable("an empty operand has no lowering")
    a, b, k = _inner_labels(*(np.empty(s) for s in shapes))
    return g.op("Einsum", input, other, equation=f"{a}{k},{b}{k}->{a}{b}")


def _onnx_trace(g, rec, input):
    n, m = rec.inputs[0].shape
    diagonal = np.arange(min(n, m), dtype=np.int64) * (m + 1)
    picked = g.op("Gather", g.op("Reshape", input, g.ints([-1])), g.const(diagonal), axis=0)
    # summed in the output's dtype (int64 for integers and bool, as the forward): a bool sum would be an or
    return g.op("ReduceSum", cast_to(g, picked, rec.inputs[0].dtype, rec.output.dtype), keepdims=0)


def _onnx_cross(g, rec, input, other):
    """numpy's cross along the op's axis: (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0)."""
    attrs = rec.attributes
    empty = [np.empty(s.shape, s.dtype) for s in rec.inputs]
    axis = _check_cross(
        rec.op_name, empty[0], empty[1], attrs.get("dim", -1 if rec.op_name == "linalg_cross" else None)
    )
    axis = axis % len(np.broadcast_shapes(*(s.shape for s in rec.inputs)))

    def turned(x, order):
        return g.op("Gather", x, g.const(np.array(order, np.int64)), axis=axis)

    first = g.op("Mul", turned(input, [1, 2, 0]), turned(other, [2, 0, 1]))
    return g.op("Sub", first, g.op("Mul", turned(input, [2, 0, 1]), turned(other, [1, 2, 0])))


for _op in (addmm, addmv, addr, addbmm, baddbmm):
    lowering(_op, _onnx_add_product)
for _op in (mv, vdot):
    lowering(_op, _onnx_matmul)
lowering(inner, _onnx_inner)
lowering(trace, _onnx_trace)
for _op in (cross, linalg_cross):
    lowering(_op, _onnx_cross)
for _op in (multi_dot, chain_matmul):
    lowering(_op, not_exportable="its lowering (MatMuls in the forward's cheapest-chain order) is not written yet")
for _op in (cdist, pdist, dist, renorm, cov, corrcoef):
    lowering(_op, not_exportable="its lowering (a decomposition as the forward computes it) is not written yet")
