"""A compiled step equals the same eager step bit for bit, or raises -- never a third outcome (issue #18).

Two twins are built from the same seeds: one runs ``loss = fn(*args); loss.backward()`` (eager), the other the
``tape.compile``d ``fn``. Between calls both get the very same change -- a closed-over array refilled in place, a
Python number in a config, ``train()``/``eval()``, ``Dropout.p``, a submodule replaced, a parameter reassigned or
replaced, optimizer settings, ``zero_grad`` inside or outside the step, other shapes and dtypes, signed zeros,
out-of-range and negative indices. After every call the compiled loss and every parameter's ``.grad`` must equal
eager's byte for byte (``tobytes``: signed zeros and NaN payloads count), or the compiled call raised
``CompileError`` or the very error eager raised. Each scenario also asserts that the compiled path was used
(``step.replays > 0``), so a compile that silently became eager everywhere would not pass unnoticed.
"""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest
from paths import EXAMPLES

import ops
import tape
from tape import nn, optim
from tape.compile import CompileError
from tape.tools.verify import op_samples

sys.path.insert(0, str(EXAMPLES))

import common  # noqa: E402
import padded_classification  # noqa: E402


def same_bits(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


class Twin:
    """One side: a world (model, optimizer, config, closed-over arrays) and how a step is called."""

    def __init__(self, world, compiled: bool):
        self.world = world
        self.step = tape.compile(world.fn, list(world.params())) if compiled else None

    def call(self, args):
        if self.step is None:
            loss = self.world.fn(*args)
            loss.backward()
            return loss.item()
        loss, _ = self.step(*args)
        return loss.item()


def outcome(twin, args):
    try:
        return twin.call(args), None
    except Exception as e:  # noqa: BLE001 -- the outcome itself is what the test compares
        return None, e


def run_twins(make_world, changes):
    """``changes``: a list of (name, change(world), args(world)); returns the compiled step."""
    eager, compiled = Twin(make_world(), False), Twin(make_world(), True)
    for k, (name, change, args) in enumerate(changes):
        for twin in (eager, compiled):
            change(twin.world)
        loss_e, error_e = outcome(eager, args(eager.world))
        loss_c, error_c = outcome(compiled, args(compiled.world))
        where = f"call {k} ({name})"
        if error_c is not None:
            if isinstance(error_c, CompileError):  # fn's side effects ran, the step did not: the twins part here
                assert "fn read the planned shape" in str(error_c), f"{where}: {error_c}"  # the one CompileError
                break
            assert error_e is not None, f"{where}: compiled raised {error_c!r}, eager did not"
            assert type(error_c) is type(error_e) and str(error_c) == str(error_e), (
                f"{where}: compiled raised {error_c!r}, eager {error_e!r}"
            )
            continue
        assert error_e is None, f"{where}: eager raised {error_e!r}, compiled returned {loss_c}"
        assert same_bits(loss_c, loss_e), f"{where}: loss {loss_c!r} compiled, {loss_e!r} eager"
        pe, pc = list(eager.world.params()), list(compiled.world.params())
        assert len(pe) == len(pc)
        for i, (a, b) in enumerate(zip(pe, pc)):
            ga = None if a.grad is None else a.grad.numpy()
            gb = None if b.grad is None else b.grad.numpy()
            assert same_bits(ga, gb), f"{where}: gradient of parameter {i} differs"
        for twin in (eager, compiled):
            twin.world.after_call()
        for i, (a, b) in enumerate(zip(eager.world.params(), compiled.world.params())):
            assert same_bits(a.numpy(), b.numpy()), f"{where}: parameter {i} differs after the update"
    return compiled.step


# -- the examples' models -----------------------------------------------------------------------------------------
class ModelWorld:
    """A model, its optimizer, a config read by fn, and batches drawn from a seeded generator."""

    def __init__(self, model, loss, batch, lr=3e-3):
        self.model, self.loss, self.batch = model, loss, batch
        self.optimizer = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.config = {"weight": 1.0, "temperature": 1.0, "zero_grad_inside": False, "zero_grad_outside": True}
        self.data_rng = np.random.default_rng(5)
        self.current = self.batch(self.data_rng)

    def params(self):
        return self.model.parameters()

    def fn(self, *args):
        if self.config["zero_grad_inside"]:
            self.optimizer.zero_grad()
        return self.loss(self, *args) * self.config["weight"]

    def after_call(self):
        self.optimizer.step()
        if self.config["zero_grad_outside"]:
            self.optimizer.zero_grad()


def own_generators(model, seed):
    """Each twin's dropout draws from its own Generator (nn's default one would be shared by both twins)."""
    for m in model.modules():
        if hasattr(m, "rng"):
            m.rng = np.random.default_rng(seed)


def gpt_world(dropout=0.1):
    nn.manual_seed(0)
    model = common.TinyGPT(9, 10, d_model=16, num_heads=2, num_layers=1, dropout=dropout)
    own_generators(model, 11)

    def batch(rng, n=4, length=8):
        tokens = rng.integers(0, 9, size=(n, length + 1))
        return tokens[:, :-1], tokens[:, 1:]

    def loss(world, tokens, targets):
        logits = world.model(tokens) / world.config["temperature"]
        return ops.cross_entropy(ops.reshape(logits, (-1, logits.shape[-1])), ops.reshape(targets, (-1,)))

    return ModelWorld(model, loss, batch)


def classifier_world():
    nn.manual_seed(0)
    model = padded_classification.Encoder(8, d_model=16, num_heads=2, num_layers=1)
    own_generators(model, 11)

    def batch(rng, n=4):
        return padded_classification.make_batch(rng, n, 1, 8)

    def loss(world, tokens, lengths, labels):
        return ops.cross_entropy(world.model(tokens, lengths), labels)

    return ModelWorld(model, loss, batch)


def nothing(world):
    pass


def fresh(world):
    world.current = world.batch(world.data_rng)


def current(world):
    return world.current


def setter(path, value):
    def change(world):
        target = world
        *parents, last = path
        for name in parents:
            target = getattr(target, name) if not isinstance(target, dict) else target[name]
        if isinstance(target, dict):
            target[last] = value
        else:
            setattr(target, last, value)

    return change


def both(*changes):
    def change(world):
        for c in changes:
            c(world)

    return change


def each_dropout(attr, value):
    def change(world):
        for m in world.model.modules():
            if isinstance(m, nn.Dropout):
                setattr(m, attr, value)

    return change


def reassign_parameter(world):
    p = next(iter(world.model.parameters()))
    p.data = p.numpy() * 0.5


def replace_head(world):
    """A new submodule of the same shape (its own initial weights, drawn from the same seed on both sides)."""
    nn.manual_seed(3)
    last = world.model.head if hasattr(world.model, "head") else world.model.classifier
    new = nn.Linear(last.weight.shape[1], last.weight.shape[0])
    if hasattr(world.model, "head"):
        world.model.head = new
    else:
        world.model.classifier = new
    world.optimizer = optim.AdamW(world.model.parameters(), lr=3e-3, weight_decay=0.01)


def replace_parameter_object(world):
    norm = world.model.norm
    norm.weight = nn.Parameter(np.full(norm.weight.shape, 1.5, norm.weight.dtype))
    world.optimizer = optim.AdamW(world.model.parameters(), lr=3e-3, weight_decay=0.01)


def set_lr(world):
    for group in world.optimizer.param_groups:
        group["lr"] = 1e-2


def refill_tokens(value):
    def change(world):
        tokens = world.current[0]
        tokens[0, 0] = value  # in place: the array the step is called with again

    return change


def refill_targets(value):
    def change(world):
        world.current[1][0, 0] = value

    return change


MODEL_CHANGES = [
    ("first", nothing, current),
    ("same batch", nothing, current),
    ("new batch", fresh, current),
    ("batch refilled in place", refill_tokens(3), current),
    ("a loss weight changed", setter(("config", "weight"), 0.5), current),
    ("the temperature changed", both(fresh, setter(("config", "temperature"), 2.0)), current),
    ("a weight of -0.0", setter(("config", "weight"), -0.0), current),
    ("a weight of 0.0", setter(("config", "weight"), 0.0), current),
    ("weight back", setter(("config", "weight"), 1.0), current),
    ("Dropout.p changed", each_dropout("p", 0.3), current),
    ("eval()", lambda w: w.model.eval(), current),
    ("still eval", fresh, current),
    ("train()", lambda w: w.model.train(), current),
    ("zero_grad inside fn", setter(("config", "zero_grad_inside"), True), current),
    ("no zero_grad at all", both(setter(("config", "zero_grad_inside"), False),
                                 setter(("config", "zero_grad_outside"), False)), current),
    ("accumulating", fresh, current),
    ("zero_grad outside again", setter(("config", "zero_grad_outside"), True), current),
    ("a parameter reassigned", reassign_parameter, current),
    ("a parameter object replaced", replace_parameter_object, current),
    ("a submodule replaced", replace_head, current),
    ("after the replacement", fresh, current),
    ("optimizer lr changed", set_lr, current),
    ("smaller batch", lambda w: setattr(w, "current", w.batch(w.data_rng, 2)), current),
    ("batch size back", fresh, current),
    ("same again", nothing, current),
]


def gpt_changes():
    return [
        *MODEL_CHANGES,
        ("a class id of -1", refill_targets(-1), current),
        ("ignored class id", both(fresh, refill_targets(-100)), current),
        ("a class id out of range", both(fresh, refill_targets(9)), current),
        ("a token of -1", both(fresh, refill_tokens(-1)), current),
        ("a token out of range", both(fresh, refill_tokens(9)), current),
        ("fine again", fresh, current),
        ("fine again", fresh, current),
    ]


def classifier_changes():
    def lengths(value):
        def change(world):
            world.current[1][0] = value

        return change

    def labels(value):
        def change(world):
            world.current[2][0] = value

        return change

    return [
        *MODEL_CHANGES,
        ("lengths refilled in place", lengths(1), current),
        ("a length of 0", lengths(0), current),
        ("a label of -1", both(fresh, labels(-1)), current),
        ("a label out of range", both(fresh, labels(2)), current),
        ("fine again", fresh, current),
        ("fine again", fresh, current),
    ]


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_gpt_step_equals_eager(dropout):
    step = run_twins(lambda: gpt_world(dropout), gpt_changes())
    assert step.replays > 0


def test_padded_classifier_step_equals_eager():
    step = run_twins(classifier_world, classifier_changes())
    assert step.replays > 0


def test_float64_model_equals_eager():
    def world():
        nn.manual_seed(0)
        model = common.TinyGPT(9, 10, d_model=8, num_heads=2, num_layers=1, dtype=np.float64)
        own_generators(model, 11)
        w = gpt_world(0.0)
        return ModelWorld(model, w.loss, w.batch)

    step = run_twins(world, MODEL_CHANGES[:12])
    assert step.replays > 0


# -- small op chains: closed-over arrays, Python numbers, indices -----------------------------------------------------
class ChainWorld:
    """fn reads a parameter, a closed-over array (refilled in place), a config number and an index array."""

    def __init__(self, body, param, extras):
        self.w = tape.tensor(param, requires_grad=True)
        self.extras = {k: np.array(v) for k, v in extras.items()}
        self.config = {"scale": 1.5, "zero_grad_inside": False}
        self.body = body
        self.arg = None

    def params(self):
        return [self.w]

    def fn(self, *args):
        if self.config["zero_grad_inside"]:
            self.w.grad = None
        return self.body(self, *args)

    def after_call(self):
        self.w.grad = None


def chain_changes(extra_changes=()):
    def refill(name, value):
        def change(world):
            if name in world.extras:
                world.extras[name][...] = value

        return change

    return [
        ("first", nothing, lambda w: ()),
        ("again", nothing, lambda w: ()),
        ("mask refilled in place", refill("mask", 0.25), lambda w: ()),
        ("config number changed", setter(("config", "scale"), -2.0), lambda w: ()),
        ("config number -0.0", setter(("config", "scale"), -0.0), lambda w: ()),
        ("config number 0.0", setter(("config", "scale"), 0.0), lambda w: ()),
        ("parameter reassigned", lambda w: setattr(w.w, "data", w.w.numpy() * -1.0), lambda w: ()),
        ("parameter replaced", lambda w: setattr(w, "w", tape.tensor(w.w.numpy() + 1, requires_grad=True)),
         lambda w: ()),
        ("zero_grad inside", setter(("config", "zero_grad_inside"), True), lambda w: ()),
        ("same", nothing, lambda w: ()),
        *extra_changes,
        ("same", nothing, lambda w: ()),
        ("same", nothing, lambda w: ()),
    ]


def test_elementwise_chain_with_signed_zero_arguments():
    def body(world, offset):
        y = ops.tanh(world.w * world.config["scale"] + offset) * world.extras["mask"]
        return ops.sum(y * y + ops.mul(world.w, offset))

    data = np.array([[0.5, -1.0, 0.0], [2.0, -0.0, 1.0]], np.float32)
    changes = [(name, change, lambda w: (0.0,)) for name, change, _ in chain_changes()]
    changes += [("-0.0 argument", nothing, lambda w: (-0.0,)), ("0.0 argument", nothing, lambda w: (0.0,)),
                ("-0.0 argument", nothing, lambda w: (-0.0,)), ("nan argument", nothing, lambda w: (float("nan"),))]
    step = run_twins(lambda: ChainWorld(body, data, {"mask": np.ones((2, 3), np.float32)}), changes)
    assert step.replays > 0


def test_inplace_ops_inside_the_step_equal_eager():
    """In-place ops in fn (issue #31): on non-leaves (rebased histories), ``x[idx] = v`` with v's gradient, an
    augmented assignment, and a closed-over buffer updated under no_grad every call (a side effect eager has too).
    Such a call runs eagerly (docs/compile.md): the twins must agree bit for bit, buffer included."""

    def body(world, offset):
        h = world.w * world.config["scale"]
        h.add_(offset)
        h[0] = ops.tanh(world.w[1]) * 2.0
        h *= world.w
        with tape.no_grad():
            world.buffer.mul_(0.5).add_(h.detach())
        return ops.sum(h * h) + ops.sum(world.buffer)

    data = np.array([[0.5, -1.0, 0.0], [2.0, -0.0, 1.0]], np.float64)

    def world():
        w = ChainWorld(body, data, {"mask": np.ones((2, 3))})
        w.buffer = tape.zeros(2, 3, dtype=np.float64)
        return w

    changes = [(name, change, lambda w: (0.25,)) for name, change, _ in chain_changes()]
    step = run_twins(world, changes)
    assert step.replays == 0 and step.records > 0


def test_arguments_changing_kind_between_calls():
    """A traced call matches its plan entry by its positional arguments' kinds without binding (tape/compile.py's
    fast signature): every change of kind -- a float becoming a tensor, an int, a numpy scalar, a bool; an outside
    tensor's dtype or requires_grad; operands swapped; another earlier output -- must still give eager's bits."""

    def body(world, a, b, swap):
        y = ops.tanh(world.w * a) + b
        z = ops.mul(y, world.w) if not swap else ops.mul(world.w, y)
        return ops.sum(ops.mul(z, a) + (y if world.config["scale"] > 0 else z))

    data = np.array([[0.5, -1.0, 0.0], [2.0, -0.0, 1.0]], np.float32)
    t32 = lambda v, rg=False: tape.tensor(np.float32(v), requires_grad=rg)  # noqa: E731
    args = [
        ("floats", (1.5, 0.25, False)), ("floats again", (-0.0, 2.0, False)),
        ("a tensor for a", (t32(1.5), 0.25, False)), ("floats", (1.5, 0.25, False)),
        ("an int", (2, 0.25, False)), ("a numpy scalar", (np.float32(1.5), 0.25, False)),
        ("a bool", (True, 0.25, False)), ("floats", (0.5, 0.25, False)),
        ("a tensor for b", (0.5, t32(0.25), False)), ("b requires grad", (0.5, t32(0.25, True), False)),
        ("b float64", (0.5, tape.tensor(np.float64(0.25)), False)), ("operands swapped", (0.5, 0.25, True)),
        ("floats", (0.5, 0.25, False)), ("another earlier output", (0.5, 0.25, False)), ("floats", (0.75, 1.0, False)),
    ]
    changes = []
    for name, a in args:
        scale = -1.0 if name == "another earlier output" else 1.5
        changes.append((name, setter(("config", "scale"), scale), lambda w, a=a: a))
    detach = lambda w: setattr(w, "w", tape.tensor(w.w.numpy(), requires_grad=False))  # noqa: E731
    attach = lambda w: setattr(w, "w", tape.tensor(w.w.numpy(), requires_grad=True))  # noqa: E731
    b = t32(1.0, True)  # (the loss keeps a graph while w has none)
    changes += [("w with grad", nothing, lambda w: (0.5, b, False)), ("again", nothing, lambda w: (0.75, b, False)),
                ("w without grad", detach, lambda w: (0.75, b, False)), ("again", nothing, lambda w: (0.5, b, False)),
                ("w with grad", attach, lambda w: (0.75, b, False)), ("again", nothing, lambda w: (0.5, b, False))]
    step = run_twins(lambda: ChainWorld(body, data, {}), changes)
    assert step.replays >= 6


def _indexed(which: str, world):
    """The op ``which`` reading the world's integer ``index`` (checked against the weight's shape) on its weight."""
    idx = world.extras["index"]
    w = world.w * world.config["scale"]
    return {
        "embedding": lambda: ops.embedding(idx[0], w),
        "gather": lambda: ops.gather(w, 1, idx),
        "getitem": lambda: w[idx[0]],
        "take_along": lambda: ops.gather(w, 0, idx),
        "cross_entropy": lambda: ops.cross_entropy(w, idx[:, 0]),
    }[which]()


@pytest.mark.parametrize("which", ["embedding", "gather", "getitem", "take_along", "cross_entropy"])
def test_indices_read_by_a_replayed_step_are_checked(which):
    def body(world):
        return ops.sum(_indexed(which, world) * world.extras["mask"].sum())

    def index(value):
        def change(world):
            world.extras["index"][0, 0] = value

        return change

    extra = [("index -1", index(-1), lambda w: ()), ("index 0", index(0), lambda w: ()),
             ("index out of range", index(7), lambda w: ()), ("index -4", index(-4), lambda w: ()),
             ("index 1", index(1), lambda w: ())]
    data = np.arange(12, dtype=np.float64).reshape(3, 4) / 7
    make = lambda: ChainWorld(body, data, {"index": np.array([[0, 1], [2, 1], [1, 0]]),  # noqa: E731
                                           "mask": np.ones(2)})
    step = run_twins(make, chain_changes(extra))
    assert step.replays > 0


def test_a_boolean_mask_whose_count_changes():
    def body(world):
        return ops.sum(world.w[world.extras["mask"] > 0.5] * world.config["scale"])

    def refill(values):
        def change(world):
            world.extras["mask"][...] = values

        return change

    changes = [("first", nothing, lambda w: ()), ("same", nothing, lambda w: ()),
               ("another count", refill([1.0, 1.0, 1.0, 0.0]), lambda w: ()),
               ("same count, other places", refill([0.0, 1.0, 1.0, 1.0]), lambda w: ()),
               ("same", nothing, lambda w: ()), ("same", nothing, lambda w: ())]
    make = lambda: ChainWorld(body, np.arange(4.0), {"mask": np.array([1.0, 0.0, 1.0, 0.0])})  # noqa: E731
    step = run_twins(make, changes)
    assert step.replays > 0


def test_fn_reading_values_and_drawing_numbers():
    """Python reads values (item, bool, numpy), draws numpy randomness and branches on them: still eager's result."""
    rng_state = {"rng": None}

    def body(world):
        y = ops.tanh(world.w * world.config["scale"])
        if float(y.sum().item()) > 0:
            y = y * 2.0
        noise = rng_state["rng"].standard_normal(world.w.shape)
        return ops.sum(y + noise) + float(np.asarray(y.detach()).max())

    def make():
        rng_state["rng"] = np.random.default_rng(1)  # both twins start from the same state; each call draws once
        return ChainWorld(body, np.linspace(-1, 1, 6), {"mask": np.ones(6)})

    # the two twins share one rng_state dict: give each its own generator
    eager_rng, compiled_rng = np.random.default_rng(1), np.random.default_rng(1)
    worlds = iter([eager_rng, compiled_rng])

    def make_own():
        world = make()
        own = next(worlds)
        world.body = lambda w: (rng_state.__setitem__("rng", own), body(w))[1]
        return world

    run_twins(make_own, chain_changes())


def test_dropout_with_python_draws_between_ops():
    """The step draws from the same Generator as its dropout, between ops: eager's interleaving, or an error."""

    def make():
        world = ChainWorld(None, np.linspace(0.5, 1.5, 8), {"mask": np.ones(8)})
        gen = np.random.default_rng(7)

        def body(w):
            h = ops.dropout(w.w * w.config["scale"], p=0.5, rng=gen)
            extra = gen.random()
            return ops.sum(ops.dropout(h * extra, p=0.5, rng=gen) * w.extras["mask"])

        world.body = body
        return world

    run_twins(make, chain_changes())


def test_dropout_with_a_generator_equals_eager():
    def make():
        world = ChainWorld(None, np.linspace(0.5, 1.5, 8), {"mask": np.ones(8)})
        gen = np.random.default_rng(7)
        world.body = lambda w: ops.sum(ops.dropout(w.w * w.config["scale"], p=0.5, rng=gen) * w.extras["mask"])
        return world

    run_twins(make, chain_changes())  # (a call drawing from a Generator runs eagerly: nothing to replay)


# -- every registry op with a floating first input, as one step ----------------------------------------------------
def _first_float_sample(op):
    for s in op_samples(op):
        first = s.inputs[0] if s.inputs else None
        if isinstance(first, np.ndarray) and first.dtype == np.float64 and op.input_states[0] is tape.Grad.RULE:
            if all(not isinstance(x, list | tuple) for x in s.inputs):
                return s
    return None


# the ops a step can differentiate through their first input (integer, bool and index-first ops have no such step)
OPS = [
    op
    for op in tape.registered_ops()
    if op.family != "test" and not op.name.endswith("_backward") and _first_float_sample(op) is not None
]


def test_most_ops_have_a_compiled_step():
    assert len(OPS) >= 0.8 * len(tape.registered_ops()), len(OPS)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_registry_op_step_equals_eager(op):
    sample = _first_float_sample(op)
    rest = [copy.deepcopy(x) for x in sample.inputs[1:]]
    attrs = copy.deepcopy(sample.attrs)

    def body(world):
        x = world.w * world.config["scale"]
        others = [world.extras[f"in{k}"] if f"in{k}" in world.extras else None for k in range(len(rest))]
        out = op(x, *others, **attrs)
        outs = out if isinstance(out, tuple) else (out,)
        total = None
        for o in outs:
            if o is not None and o.dtype.kind == "f":
                term = ops.sum(o * o)
                total = term if total is None else total + term
        return total if total is not None else ops.sum(x)

    extras = {f"in{k}": v for k, v in enumerate(rest) if v is not None}
    changes = chain_changes()
    if extras:
        name = next(iter(extras))

        def refill(world):
            a = world.extras[name]
            if a.dtype.kind == "f":
                a[...] = a * 0.5 + 0.25

        changes.insert(3, ("an input refilled in place", refill, lambda w: ()))
    make = lambda: ChainWorld(body, sample.inputs[0], extras)  # noqa: E731
    run_twins(make, changes)


def test_every_parameter_frozen_raises_as_eager_backward():
    """Eager ``loss.backward()`` raises when nothing requires grad; the compiled step used to return (loss, Nones)."""

    def body(world):
        return ops.sum(ops.tanh(world.w * world.config["scale"]))

    def frozen():
        world = ChainWorld(body, np.linspace(-1, 1, 6), {"mask": np.ones(6)})
        world.w.requires_grad = False
        return world

    eager, compiled = Twin(frozen(), False), Twin(frozen(), True)
    for _ in range(3):  # the first call records, the later ones would replay
        _, error_e = outcome(eager, ())
        _, error_c = outcome(compiled, ())
        assert error_e is not None, "eager backward() of a loss that requires no grad returned"
        assert type(error_c) is type(error_e) and str(error_c) == str(error_e), (error_c, error_e)


@pytest.mark.parametrize("which", ["embedding", "gather", "getitem", "cross_entropy"])
def test_a_failing_check_stops_fn_where_eager_stops(which):
    """fn draws a Python random number after an op whose index check fails: eager raises before the draw, so the
    compiled call must too (it used to draw, and every later call's loss differed from eager's)."""
    import random

    def body(world):
        return ops.sum(_indexed(which, world)) * world.rng.random()

    def index(value):
        def change(world):
            world.extras["index"][0, 0] = value

        return change

    def make():
        world = ChainWorld(body, np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
                           {"index": np.array([[0, 1], [2, 1], [1, 0]]), "mask": np.ones(2)})
        world.rng = random.Random(3)  # each twin its own, from the same state
        return world

    changes = [("first", nothing, lambda w: ()), ("again", nothing, lambda w: ()), ("same", nothing, lambda w: ()),
               ("index out of range", index(7), lambda w: ()), ("index 1", index(1), lambda w: ()),
               ("same", nothing, lambda w: ()), ("index -9", index(-9), lambda w: ()),
               ("index 0", index(0), lambda w: ()), ("same", nothing, lambda w: ())]
    step = run_twins(make, changes)
    assert step.replays > 0
