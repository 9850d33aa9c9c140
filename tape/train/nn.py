"""Neural-network building blocks on top of the op library: ``Parameter``, ``Module`` (with torch's forward and
backward hooks) and torch.nn's layers -- linear, embedding, normalisation, convolution and pooling, activation and
loss modules, attention; the recurrent layers are in tape/train/rnn.py, re-exported here.

A ``Module`` registers the ``Parameter``s and sub-modules assigned to its attributes (lists of modules
become a ``ModuleList``), so ``parameters()``, ``state_dict()``, ``train()``/``eval()`` and
``zero_grad()`` reach the whole tree. Every layer computes only through registered ops (``ops.linear``,
``ops.layer_norm``, ``ops.scaled_dot_product_attention``, ...), so everything it does is recorded and
differentiated by the engine and checked against PyTorch by the generated op tests.

Initialisation follows torch's defaults and draws from a ``tape.Generator`` (or any numpy Generator): pass
``rng=`` to a layer, or seed ``tape.default_generator`` with ``tape.manual_seed(seed)`` (``nn.manual_seed`` is
the same function; every layer built without ``rng`` draws from it, in construction order, so a model is
deterministic for a seed). A layer with an empty
dimension (``Linear(0, n)``) initialises to zeros, as torch does.

Copies of a module -- ``copy.copy``, ``copy.deepcopy``, ``pickle`` -- are new module trees holding new
``Parameter``s: each with its own identity (tensor id), version counter and read-only array, so an
optimizer step on one never invalidates the other's graphs and gradients computed through a copy (an EMA
teacher, say) never land in the original. Parameters shared within a module stay shared in the copy.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

import ops

from .. import random
from ..devices import on_cpu, to_arguments
from ..state import no_grad
from ..tensors import Tensor
from . import init  # noqa: F401  -- tape.nn.init
from .optim import zero_grads

__all__ = [
    "Parameter",
    "Module",
    "ModuleList",
    "Sequential",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Identity",
    "Linear",
    "BatchNorm1d",
    "BatchNorm2d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Unflatten",
    "init",
    "Embedding",
    "LayerNorm",
    "RMSNorm",
    "Dropout",
    "GELU",
    "MultiHeadAttention",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
    "TransformerBlock",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
    "LSTM",
    "GRU",
    "manual_seed",
]

manual_seed = random.manual_seed  # the one default generator (tape.random), as torch.manual_seed


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    """The generator a layer draws from: its own ``rng`` or ``tape.default_generator``."""
    return random.as_generator("nn", rng)


class Parameter(Tensor):
    """A Tensor that a Module registers as one of its learnable values (requires_grad=True by default)."""

    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True, name: str | None = None):
        array = data._data if isinstance(data, Tensor) else data
        super().__init__(array, requires_grad=requires_grad, name=name)

    def __repr__(self) -> str:
        return "Parameter(" + super().__repr__() + ")"

    # Copies are Parameters (never plain Tensors) made by the constructor: a new leaf with its own id,
    # version counter and read-only copy of the array.
    def __copy__(self) -> Parameter:
        p = Parameter(self._data, requires_grad=self.requires_grad, name=self.name)
        p.grad = self.grad
        return p

    def __deepcopy__(self, memo) -> Parameter:
        p = Parameter(self._data, requires_grad=self.requires_grad, name=self.name)
        memo[id(self)] = p
        p.grad = copy.deepcopy(self.grad, memo)
        return p

    def __reduce__(self):
        return _rebuild_parameter, (np.array(self._data), self.requires_grad, self.name, self.grad)


def _rebuild_parameter(array, requires_grad, name, grad) -> Parameter:
    p = Parameter(array, requires_grad=requires_grad, name=name)
    p.grad = grad
    return p


class IncompatibleKeys(NamedTuple):
    """What ``Module.load_state_dict`` did not match: names the module has that the state dict lacks, and names
    the state dict has that the module lacks."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer and model. Subclasses set parameters and sub-modules as attributes in
    ``__init__`` and implement ``forward``; calling the module calls ``forward``."""

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    # -- registration --------------------------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        params, modules = self.__dict__["_parameters"], self.__dict__["_modules"]
        buffers = self.__dict__.get("_buffers", {})
        if name in buffers:  # assigning to a buffer replaces its tensor (an in-place op changes it)
            buffers[name] = _buffer_tensor(type(self).__name__, name, value)
            return
        params.pop(name, None)
        modules.pop(name, None)
        self.__dict__.pop(name, None)
        if isinstance(value, list | tuple) and value and all(isinstance(v, Module) for v in value):
            value = ModuleList(value)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        else:
            if isinstance(value, list | tuple) and any(isinstance(v, Module | Parameter) for v in value):
                raise TypeError(
                    f"{type(self).__name__}.{name}: a list mixing modules/parameters with other values "
                    f"would not be registered; use a ModuleList of modules"
                )
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        d = self.__dict__
        if name in d.get("_parameters", {}):
            return d["_parameters"][name]
        if name in d.get("_modules", {}):
            return d["_modules"][name]
        if name in d.get("_buffers", {}):
            return d["_buffers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent.discard(name)
        else:
            object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """A non-learnable tensor of the module (running statistics, ...): reached by ``name``, listed by
        ``buffers()``, saved in ``state_dict()`` when ``persistent``, cast in place by ``to(dtype)``; assigning
        ``self.name = new`` replaces it, an in-place op (``self.name.copy_(new)``) changes it."""
        if not isinstance(name, str) or not name.isidentifier() or "." in name:
            raise KeyError(
                f"{type(self).__name__}.register_buffer: argument 'name' expected an identifier, got {name!r}"
            )
        if name in self._parameters or name in self._modules:
            raise KeyError(f"{type(self).__name__}.register_buffer: '{name}' is already a parameter or a module")
        self.__dict__.pop(name, None)
        self._buffers[name] = _buffer_tensor(type(self).__name__, name, tensor)
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` (or None) as the child ``name`` (torch's; ``self.name = module`` does the same)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.add_module: expected a Module or None, got {type(module).__name__}")
        if not isinstance(name, str) or "." in name or not name:
            raise KeyError(
                f"{type(self).__name__}.add_module: argument 'name' expected a name without '.', got {name!r}"
            )
        self.__dict__.pop(name, None)
        self._parameters.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or None: listed nowhere, as torch's) as the parameter ``name``."""
        if name in self._modules or name in self._buffers:
            raise KeyError(f"{type(self).__name__}.register_parameter: '{name}' is already a module or a buffer")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"{type(self).__name__}.register_parameter: expected a Parameter or None, got {type(param).__name__}"
            )
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` ('' is this module)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule '{part}' (looking up '{target}')")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        return self._registered_at(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        return self._registered_at(target, "_buffers", "buffer")

    def _registered_at(self, target: str, registry: str, kind: str):
        path, _, name = target.rpartition(".")
        owner = self.get_submodule(path)
        found = getattr(owner, registry).get(name)
        if found is None:
            raise AttributeError(f"{type(owner).__name__} has no {kind} '{name}' (looking up '{target}')")
        return found

    # -- traversal -----------------------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        yield from self._modules.values()

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every descendant, depth first, with dotted names ('' for this one)."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) for every parameter, each shared parameter once."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{module_name}.{name}" if module_name else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, b in module._buffers.items():
                if b is not None:
                    yield (f"{module_name}.{name}" if module_name else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn) -> Module:
        """Call ``fn(module)`` on every sub-module, then on this one (torch's order); returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- modes and gradients -------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout active) on this module and every descendant; returns self."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``p.grad = None``; zeros with ``set_to_none=False``)."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def to(self, *args, **kwargs) -> Module:
        """Cast every floating parameter and buffer to ``dtype`` in place (their ``.data`` and dtype change; the
        Parameter and buffer objects stay, so an optimizer built before the cast keeps training them, as in torch;
        gradients are cast with them); returns self. torch's forms (dtype), (device, dtype), (tensor); the device
        must be the CPU."""
        dtype, _ = to_arguments(f"{type(self).__name__}.to", args, kwargs)
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"{type(self).__name__}.to: argument 'dtype' expected float32 or float64, got {dtype}")
        seen: set[int] = set()
        for m in self.modules():
            for t in (*m._parameters.values(), *m._buffers.values()):
                if t is not None and t.dtype.kind == "f" and t.dtype != dtype and id(t) not in seen:
                    seen.add(id(t))
                    t.data = Tensor(t._data.astype(dtype))
        return self

    def cpu(self) -> Module:
        return self

    def cuda(self, device=None) -> Module:
        """Raises: there is no CUDA device (tape/devices.py)."""
        on_cpu(f"{type(self).__name__}.cuda", "device", "cuda" if device is None else device)
        return self

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    def half(self) -> Module:
        """float16 parameters and buffers (a storage dtype here: ops refuse to compute in it, naming the op)."""
        return self.to(np.float16)

    # -- state ---------------------------------------------------------------------------------------------
    def _state_entries(self) -> dict[str, tuple[Module, str, Tensor]]:
        """{dotted name: (owning module, attribute, tensor)} for every parameter and persistent buffer; a tied
        parameter appears under each of its names, as in torch."""
        entries = {}
        for module_name, module in self.named_modules():
            prefix = f"{module_name}." if module_name else ""
            for name, p in module._parameters.items():
                if p is not None:
                    entries[prefix + name] = (module, name, p)
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    entries[prefix + name] = (module, name, b)
        return entries

    def state_dict(self, *, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict:
        """{dotted name: tensor} of the parameters (a tied one under each name, like torch) and persistent buffers:
        detached tensors sharing the module's memory, as torch's -- ``sd[k].copy_(v)`` loads a value into the
        module, and a later optimizer step shows in them (copy them, ``{k: v.clone()}``, for a snapshot).
        ``keep_vars=True``: the Parameters themselves; ``prefix`` starts every name; ``destination`` is filled."""
        out = {} if destination is None else destination
        for name, (_, _, t) in self._state_entries().items():
            out[prefix + name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
        """Copy arrays into the parameters of the same names. Every problem is reported at once, naming the
        parameters: missing or unexpected names (ignored when ``strict=False``), a shape or dtype that does
        not match, a tied parameter given different values under its names (torch keeps the last one silently).
        Nothing is changed unless everything matches. Returns the ``missing_keys`` and ``unexpected_keys``
        (torch's ``_IncompatibleKeys``; both empty after a strict load). ``assign=True`` loads the same values; the
        module keeps its Parameter objects (torch would adopt the given tensors; their values are these)."""
        entries = self._state_entries()
        own = {name: t for name, (_, _, t) in entries.items()}
        missing = [n for n in own if n not in state_dict]
        unexpected = [n for n in state_dict if n not in own]
        problems = []
        if strict and missing:
            problems.append(f"missing parameter(s): {', '.join(missing)}")
        if strict and unexpected:
            problems.append(f"unexpected parameter(s): {', '.join(unexpected)}")
        arrays = {}
        for name, p in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            array = value._data if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != p.shape:
                problems.append(
                    f"parameter '{name}' has shape {p.shape} in the model but {array.shape} in the state dict"
                )
            elif array.dtype != p.dtype:
                problems.append(
                    f"parameter '{name}' has dtype {p.dtype} in the model but {array.dtype} in the "
                    f"state dict (convert it explicitly; minitape never casts silently)"
                )
            arrays[name] = array
        problems.extend(_tied_disagreements(entries, arrays))
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        with no_grad():
            for name, array in arrays.items():
                module, attribute, t = entries[name]
                t.data = array  # in place: the parameter and buffer objects stay (torch's copy_)
        return IncompatibleKeys(missing, unexpected)

    # -- copies --------------------------------------------------------------------------------------------
    def __copy__(self) -> Module:
        """A new module tree (this module and every sub-module) holding copies of the parameters -- new
        identities and version counters; a parameter shared within the tree stays shared. Other attributes
        are shared with the original, as in any shallow copy. (``deepcopy`` and pickling copy them too.)"""
        return self._copy_tree({})

    def _copy_tree(self, memo: dict) -> Module:
        if id(self) in memo:
            return memo[id(self)]
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        state = dict(self.__dict__)
        state["_parameters"] = {name: _copied(p, memo) for name, p in self._parameters.items()}
        state["_modules"] = {name: m._copy_tree(memo) for name, m in self._modules.items()}
        # buffers are copied too: an in-place update of the copy's running statistics must not reach this module
        state["_buffers"] = {name: None if b is None else copy.deepcopy(b, memo) for name, b in self._buffers.items()}
        state["_non_persistent"] = set(self._non_persistent)
        if "_hooks" in state:  # the copy's own tables: a hook registered on one is not registered on the other
            state["_hooks"] = {kind: dict(table) for kind, table in self._hooks.items()}
        new.__dict__.update(state)
        return new

    # -- calling -------------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def __call__(self, *args, **kwargs):
        hooks = self.__dict__.get("_hooks")
        if hooks:
            return _hooked_call(self, hooks, args, kwargs)
        if not _CALL_OBSERVERS:
            return self.forward(*args, **kwargs)
        return _observed_call(self, args, kwargs)

    # -- hooks (torch's) ---------------------------------------------------------------------------------------
    def _add_hook(self, kind: str, hook, prepend: bool = False, with_kwargs: bool = False) -> _Handle:
        if not callable(hook):
            raise TypeError(
                f"{type(self).__name__}.register_{kind}_hook: expected a callable, got {type(hook).__name__}"
            )
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = {"forward_pre": {}, "forward": {}, "full_backward": {}}
            object.__setattr__(self, "_hooks", hooks)
        return _Handle(hooks, kind, (hook, with_kwargs), prepend)

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False) -> _Handle:
        """``hook(module, args)`` before each forward; a non-None result replaces ``args`` (a tuple, or one value).
        ``with_kwargs``: ``hook(module, args, kwargs)``, returning None or ``(args, kwargs)``. ``prepend``: runs
        before the hooks already registered."""
        return self._add_hook("forward_pre", hook, prepend, with_kwargs)

    def register_forward_hook(
        self, hook, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ) -> _Handle:
        """``hook(module, args, output)`` after each forward (``with_kwargs``: ``hook(module, args, kwargs,
        output)``); a non-None result replaces the output. ``always_call`` is accepted (an exception in forward
        propagates before any hook runs)."""
        return self._add_hook("forward", hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> _Handle:
        """``hook(module, grad_input, grad_output)`` once the gradients w.r.t. the module's positional tensor inputs
        are known (None for inputs that need none); a non-None result (a tuple) replaces ``grad_input``. As torch's,
        for a module returning one tensor; more than one input that requires grad is refused."""
        return self._add_hook("full_backward", hook, prepend)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


# Observers of module calls (tape.tools.report's tracing: which module an op ran in, which tensor a module
# returned). Each has ``enter(module)`` and ``exit(module, output)``; an observer ignores other threads' calls.
_CALL_OBSERVERS: list = []


def _observed_call(module: Module, args, kwargs):
    observers = list(_CALL_OBSERVERS)
    for observer in observers:
        observer.enter(module)
    output = None
    try:
        output = module.forward(*args, **kwargs)
        return output
    finally:
        for observer in reversed(observers):
            observer.exit(module, output)


def _tied_disagreements(entries: dict, arrays: dict) -> list[str]:
    """A problem for each tensor listed under several names (tied) whose given arrays differ."""
    names_of: dict[int, list[str]] = {}
    for name, (_, _, t) in entries.items():
        if name in arrays:
            names_of.setdefault(id(t), []).append(name)
    return [
        f"parameter(s) {', '.join(names)} are tied in the model but differ in the state dict"
        for names in names_of.values()
        if any(not np.array_equal(arrays[names[0]], arrays[n], equal_nan=arrays[n].dtype.kind in "fc") for n in names)
    ]


class _Handle:
    """A registered module hook; ``remove()`` takes it off (twice: nothing happens), as torch's RemovableHandle."""

    _ids = iter(range(1, 2**62))

    def __init__(self, hooks: dict, kind: str, entry: tuple, prepend: bool = False):
        self.table, self.key = hooks[kind], next(_Handle._ids)
        if prepend:  # first in the table's order
            rest = dict(self.table)
            self.table.clear()
            self.table.update({self.key: entry, **rest})
        else:
            self.table[self.key] = entry

    def remove(self) -> None:
        self.table.pop(self.key, None)


def _hooked_call(module: Module, hooks: dict, args, kwargs):
    """A module call with its forward pre-hooks, forward hooks and full backward hooks (torch's order)."""
    for hook, with_kwargs in list(hooks["forward_pre"].values()):
        if with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    backward_hooks = [hook for hook, _ in hooks["full_backward"].values()]
    if backward_hooks:
        args, finish = _backward_hooked_inputs(module, backward_hooks, args)
    output = module.forward(*args, **kwargs) if not _CALL_OBSERVERS else _observed_call(module, args, kwargs)
    for hook, with_kwargs in list(hooks["forward"].values()):
        result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    return finish(output) if backward_hooks else output


def _backward_hooked_inputs(module: Module, backward_hooks: list, args):
    """The inputs (the one that requires grad passed through ``ops.clone``: its gradient is grad_input) and a function
    that hooks the output (its gradient is grad_output) and calls the module's full backward hooks."""
    who = f"{type(module).__name__}.register_full_backward_hook"
    needing = [k for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if len(needing) > 1:
        raise NotImplementedError(f"{who}: a call with {len(needing)} inputs that require grad (supported: one)")
    args = tuple(ops.clone(a) if k in needing else a for k, a in enumerate(args))
    count = len(args)  # the closures below hold no input: they live in the hook table as long as the graph
    grad_output: list = []  # this pass's gradient of the output, set by on_output and taken by call_hooks

    def call_hooks(grad_input: tuple) -> tuple:
        given = tuple(grad_output)
        grad_output.clear()  # the next pass through the same graph brings its own
        for hook in backward_hooks:
            result = hook(module, grad_input, given)
            if result is not None:
                grad_input = tuple(result)
        return grad_input

    def on_input(g):
        return call_hooks(tuple(g if k in needing else None for k in range(count)))[needing[0]]

    def on_output(g):
        grad_output[:] = [g]
        if not needing:
            call_hooks((None,) * count)

    def finish(output):
        if not isinstance(output, Tensor):
            raise NotImplementedError(f"{who}: the module returned {type(output).__name__} (supported: one Tensor)")
        if output.requires_grad:
            output = ops.clone(output)  # its own node: the hook sees the total gradient of what this call returned
            output.register_hook(on_output)
        return output

    if needing:
        args[needing[0]].register_hook(on_input)
    return args, finish


def _buffer_tensor(owner: str, name: str, value) -> Tensor | None:
    if value is None or isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray | np.generic | list | tuple | int | float):
        return Tensor(np.array(value))
    raise TypeError(f"{owner}: buffer '{name}' expected a Tensor, an array or None, got {type(value).__name__}")


def _copied(p: Parameter, memo: dict) -> Parameter:
    if id(p) not in memo:
        memo[id(p)] = copy.copy(p)
    return memo[id(p)]


class _Registered:
    """Container methods over one of a Module's registries, the dict that ``_store`` names: a list view
    (``_Listed``, keys '0', '1', ...) or a mapping view (``_Keyed``)."""

    _store = "_modules"

    def _entries(self) -> dict:
        return self.__dict__[self._store]

    def __len__(self) -> int:
        return len(self._entries())


class _Listed(_Registered):
    """A list view; a slice is a new container of the same class, as torch's."""

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._entries().values())[index])  # type: ignore[call-arg]
        return list(self._entries().values())[index]

    def __iter__(self) -> Iterator:
        return iter(list(self._entries().values()))

    def _renumbered(self, items: list) -> None:
        entries = self._entries()
        entries.clear()
        entries.update({str(k): v for k, v in enumerate(items)})


class _Keyed(_Registered):
    def __getitem__(self, key: str):
        return self._entries()[key]

    def __contains__(self, key) -> bool:
        return key in self._entries()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries()))

    def keys(self):
        return self._entries().keys()

    def values(self):
        return self._entries().values()

    def items(self):
        return self._entries().items()


def _as_parameter(value) -> Parameter:
    return value if isinstance(value, Parameter) else Parameter(value)


class ModuleList(_Listed, Module):
    """A list of modules, registered under the names '0', '1', ..."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        self._modules[str(len(self._modules))] = _module_of(type(self).__name__, module)
        return self

    def extend(self, modules) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, _module_of(type(self).__name__, module))
        self._renumbered(items)

    def __setitem__(self, index: int, module: Module) -> None:
        key = list(self._modules)[index]
        self._modules[key] = _module_of(type(self).__name__, module)

    def __delitem__(self, index) -> None:
        items = list(self._modules.values())
        del items[index]
        self._renumbered(items)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module

    def __add__(self, other) -> ModuleList:
        return ModuleList([*self, *other])

    def __iadd__(self, modules) -> ModuleList:
        return self.extend(modules)


def _module_of(owner: str, module) -> Module:
    if not isinstance(module, Module):
        raise TypeError(f"{owner}: expected a Module, got {type(module).__name__}")
    return module


class Sequential(ModuleList):
    """Modules applied one after the other: ``Sequential(Linear(4, 8), GELU(), Linear(8, 2))(x)``, or named,
    ``Sequential(OrderedDict(fc=..., act=...))``; a slice is a Sequential keeping the names, as torch's."""

    def __init__(self, *modules):
        if len(modules) == 1 and isinstance(modules[0], dict):  # torch's OrderedDict form: named children
            Module.__init__(self)
            for name, module in modules[0].items():
                self.add_module(name, _module_of("Sequential", module))
            return
        super().__init__(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(dict(list(self._modules.items())[index]))
        return super().__getitem__(index)

    def forward(self, x):
        for module in self:
            x = module(x)
        return x


class ModuleDict(_Keyed, Module):
    """Modules registered under string keys, in insertion order (torch.nn.ModuleDict)."""

    def __init__(self, modules=None):
        super().__init__()
        for key, module in dict(modules or {}).items():
            self[key] = module

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: expected a Module for key {key!r}, got {type(module).__name__}")
        setattr(self, key, module)


class ParameterList(_Listed, Module):
    """Parameters registered under '0', '1', ... (torch.nn.ParameterList); arrays and Tensors become Parameters."""

    _store = "_parameters"

    def __init__(self, values=()):
        super().__init__()
        for v in values:
            self.append(v)

    def append(self, value) -> ParameterList:
        self._parameters[str(len(self._parameters))] = _as_parameter(value)
        return self


class ParameterDict(_Keyed, Module):
    """Parameters registered under string keys (torch.nn.ParameterDict)."""

    _store = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        for key, value in dict(parameters or {}).items():
            self[key] = value

    def __setitem__(self, key: str, value) -> None:
        setattr(self, key, _as_parameter(value))


class Identity(Module):
    """Returns its input (extra constructor arguments are ignored, as torch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


# -- layers --------------------------------------------------------------------------------------------------
def _uniform(rng, bound: float, shape, dtype) -> np.ndarray:
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def _bound(fan_in: int) -> float:
    """torch's default init bound 1/sqrt(fan_in) (0 for an empty layer)."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def _weight_and_bias(module: Module, rng, fan_in: int, weight_shape: tuple, bias_size: int | None, dtype) -> None:
    """``module.weight`` then ``module.bias`` (None when ``bias_size`` is None), both U(-bound, bound) with
    ``_bound(fan_in)``, drawn from ``rng`` in that order."""
    bound = _bound(fan_in)
    module.weight = Parameter(_uniform(rng, bound, weight_shape, dtype))
    module.bias = None if bias_size is None else Parameter(_uniform(rng, bound, (bias_size,), dtype))


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features), initialised as torch does:
    U(-1/sqrt(in_features), 1/sqrt(in_features)) for both weight and bias."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32, rng=None, device=None):
        super().__init__()
        on_cpu("Linear", "device", device)
        self.in_features, self.out_features = in_features, out_features
        _weight_and_bias(
            self, _rng(rng), in_features, (out_features, in_features), out_features if bias else None, dtype
        )

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table ``weight[indices]`` of shape (num_embeddings, embedding_dim), initialised N(0, 1) as in
    torch; the row ``padding_idx`` (if given) starts at zero and receives no gradient."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        dtype=np.float32,
        rng=None,
        device=None,
    ):
        super().__init__()
        on_cpu("Embedding", "device", device)
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(
                f"Embedding: padding_idx must be in [{-num_embeddings}, {num_embeddings}), got {padding_idx}"
            )
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        weight = _rng(rng).standard_normal((num_embeddings, embedding_dim)).astype(dtype)
        if self.padding_idx is not None:
            weight[self.padding_idx] = 0
        self.weight = Parameter(weight)

    def forward(self, indices):
        if isinstance(indices, Tensor) and indices.dtype.kind == "f":  # else ops.embedding would first see two floats
            raise TypeError(
                f"Embedding: argument 'input' expected an integer tensor of indices, got dtype {indices.dtype}; "
                f"convert it with indices.long() (torch's nn.Embedding also takes only Long or Int indices)"
            )
        return ops.embedding(indices, self.weight, padding_idx=self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}" + (
            f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        )


def _normalized_shape(shape) -> tuple:
    return (shape,) if isinstance(shape, int | np.integer) else tuple(shape)


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dims, then scale by ``weight`` (ones) and shift by
    ``bias`` (zeros)."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype=np.float32,
        device=None,
    ):
        super().__init__()
        on_cpu("LayerNorm", "device", device)
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype)) if elementwise_affine and bias else None

    def forward(self, x):
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the last dims, scaled by ``weight`` (ones). ``eps=None`` uses the
    dtype's machine epsilon, as torch does."""

    def __init__(
        self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, dtype=np.float32, device=None
    ):
        super().__init__()
        on_cpu("RMSNorm", "device", device)
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None

    def forward(self, x):
        return ops.rms_norm(x, self.normalized_shape, self.weight, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zero each element with probability ``p`` while training and scale the rest by 1/(1-p); the identity
    in eval mode (or when p == 0)."""

    def __init__(self, p: float = 0.5, rng=None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p
        self.rng = rng

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return ops.dropout(x, p=self.p, training=True, rng=_rng(self.rng))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, approximate=self.approximate)


def _running_stats(input, running_mean, running_var, momentum: float) -> tuple[Tensor, Tensor]:
    """The running statistics torch's batch_norm leaves after a training step on ``input``:
    ``(1 - momentum) * running + momentum * batch`` with the batch's unbiased variance. Computed by ops under
    ``no_grad`` (constants, no gradient; the arguments are unchanged), so a compiled step traces and replays the
    update as eager runs it; ``momentum`` is a tensor operand, so a changing one (``momentum=None``'s 1/count)
    does not change the trace."""
    axes = (0,) + tuple(range(2, input.ndim))
    n = input.numel() // input.shape[1]
    with no_grad():
        mean = ops.mean(input, dim=axes)
        var = ops.var(input, dim=axes, correction=1 if n > 1 else 0)
        m = Tensor(np.asarray(momentum, running_mean.dtype))
        keep = ops.sub(1.0, m)
        return keep * running_mean + m * mean, keep * running_var + m * var


class _BatchNorm(Module):
    """Batch normalisation over (N, C, *) inputs. Training normalises with the batch statistics and then
    updates the buffers ``running_mean`` / ``running_var`` in place with torch's update
    (momentum, or the cumulative average when ``momentum=None``; unbiased batch variance) and counts
    ``num_batches_tracked``; eval normalises with the buffers. All three are saved in ``state_dict``."""

    _expected_dims: tuple = ()
    running_mean: Tensor  # buffers (register_buffer), declared for type checkers
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype=np.float32,
        device=None,
    ):
        super().__init__()
        on_cpu(type(self).__name__, "device", device)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(np.ones(num_features, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_features, dtype)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, dtype)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, np.int64)))

    def forward(self, x):
        if x.ndim not in self._expected_dims:
            raise ValueError(
                f"{type(self).__name__}: expected a {' or '.join(map(str, self._expected_dims))}-D input, "
                f"got shape {tuple(x.shape)}"
            )
        if isinstance(x, Tensor) and x.dtype.kind != "f":  # batch_norm refuses it in its words, before the statistics
            ops.batch_norm(x, None, None, training=True)
        use_batch = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            count = int(self.num_batches_tracked.item()) + 1
            momentum = 1.0 / count if self.momentum is None else self.momentum
            mean, var = _running_stats(x, self.running_mean, self.running_var, momentum)
            with no_grad():  # in place, as torch's: the buffer objects (and state_dict's views of them) see it
                self.num_batches_tracked.fill_(count)
                self.running_mean.copy_(mean)
                self.running_var.copy_(var)
        stats = (None, None) if use_batch else (self.running_mean, self.running_var)
        return ops.batch_norm(x, *stats, self.weight, self.bias, training=use_batch, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(_BatchNorm):
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _expected_dims = (4,)


class GroupNorm(Module):
    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, dtype=np.float32, device=None
    ):
        super().__init__()
        on_cpu("GroupNorm", "device", device)
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be a multiple of num_groups ({num_groups})"
            )
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = Parameter(np.ones(num_channels, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_channels, dtype)) if affine else None

    def forward(self, x):
        return ops.group_norm(x, self.num_groups, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}"


class _InstanceNorm(Module):
    """Instance normalisation (torch's defaults: no affine parameters, no running statistics)."""

    _expected_dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype=np.float32,
        device=None,
    ):
        super().__init__()
        on_cpu(type(self).__name__, "device", device)
        if track_running_stats:
            raise NotImplementedError(f"{type(self).__name__}: track_running_stats=True is not supported yet")
        self.num_features, self.eps = num_features, eps
        self.weight = Parameter(np.ones(num_features, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_features, dtype)) if affine else None

    def forward(self, x):
        if x.ndim not in self._expected_dims:
            raise ValueError(f"{type(self).__name__}: expected a {self._expected_dims[0]}-D input, got shape {x.shape}")
        return ops.instance_norm(x, None, None, self.weight, self.bias, eps=self.eps)


class InstanceNorm1d(_InstanceNorm):
    _expected_dims = (3,)


class InstanceNorm2d(_InstanceNorm):
    _expected_dims = (4,)


# -- constructors with torch's arguments ----------------------------------------------------------------------
def _bound_arguments(class_name: str, fields: tuple, defaults: tuple, args: tuple, kwargs: dict) -> dict:
    """A constructor's arguments as torch binds them: ``args`` by position onto ``fields``, then ``kwargs`` by
    name, the rest from ``defaults``."""
    if len(args) > len(fields):
        raise TypeError(f"{class_name}: takes at most {len(fields)} arguments {fields}, got {len(args)}")
    twice = set(fields[: len(args)]) & set(kwargs)
    if twice:
        raise TypeError(f"{class_name}: got multiple values for argument(s) {sorted(twice)}")
    unknown = set(kwargs) - set(fields)
    if unknown:
        raise TypeError(f"{class_name}: unknown argument(s) {sorted(unknown)}; accepted: {list(fields)}")
    return {**dict(zip(fields, defaults)), **dict(zip(fields, args)), **kwargs}


# -- convolutions and pooling ------------------------------------------------------------------------------
def _tuple(value, n: int) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else (value,) * n


class _ConvNd(Module):
    """torch's Conv1d/2d/3d and ConvTranspose1d/2d: weight (out, in / groups, *kernel), or (in, out / groups,
    *kernel) when transposed, and bias, both U(-1/sqrt(fan_in), +) with torch's fan_in of that weight,
    (in or out) / groups * prod(kernel) (kaiming_uniform_ with a = sqrt(5)).

    The arguments after ``kernel_size`` are ``_fields`` in torch's order (a transposed convolution's differs),
    each size a tuple of ``_dims`` ints; the forward is ``ops.<_op>`` with them in that order."""

    _dims = 0
    _op = "conv"
    _fields: tuple = ("stride", "padding", "dilation", "groups", "bias", "dtype", "rng", "device")
    _defaults: tuple = (1, 0, 1, 1, True, np.float32, None, None)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, *args, **kwargs):
        super().__init__()
        name, transposed = type(self).__name__, self._op == "conv_transpose"
        options = _bound_arguments(name, self._fields, self._defaults, args, kwargs)
        on_cpu(name, "device", options["device"])
        groups, n = options["groups"], self._dims
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels and out_channels must be multiples of groups")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, _tuple(kernel_size, n)
        for field in self._sizes():
            value = options[field]
            setattr(self, field, value if field == "groups" or isinstance(value, str) else _tuple(value, n))
        first, second = (out_channels, in_channels) if transposed else (in_channels, out_channels)
        fan_in = first // groups * math.prod(self.kernel_size)
        weight_shape = (second, first // groups) + self.kernel_size
        bias_size = out_channels if options["bias"] else None
        _weight_and_bias(self, _rng(options["rng"]), fan_in, weight_shape, bias_size, options["dtype"])

    @classmethod
    def _sizes(cls) -> tuple:
        """The op's arguments after the bias, in its order."""
        return tuple(f for f in cls._fields if f not in ("bias", "dtype", "rng", "device"))

    def forward(self, x):
        conv = getattr(ops, f"{self._op}{self._dims}d")
        return conv(x, self.weight, self.bias, *(getattr(self, f) for f in self._sizes()))

    def extra_repr(self) -> str:
        output_padding = f", output_padding={self.output_padding}" if "output_padding" in self._fields else ""
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}{output_padding}"
        )


class Conv1d(_ConvNd):
    _dims = 1


class Conv2d(_ConvNd):
    _dims = 2


class Conv3d(_ConvNd):
    _dims = 3


class _ConvTransposeNd(_ConvNd):
    _op = "conv_transpose"
    _fields = ("stride", "padding", "output_padding", "groups", "bias", "dilation", "dtype", "rng", "device")
    _defaults = (1, 0, 0, 1, True, 1, np.float32, None, None)


class ConvTranspose1d(_ConvTransposeNd):
    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    _dims = 2


class Unflatten(Module):
    """torch.nn.Unflatten: dim ``dim`` of the input becomes the dims ``unflattened_size`` (one may be -1)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        shape = tuple(x.shape)
        dim = self.dim + len(shape) if self.dim < 0 else self.dim
        if not 0 <= dim < len(shape):
            raise IndexError(f"Unflatten: dim {self.dim} is out of range for an input of shape {shape}")
        return ops.reshape(x, shape[:dim] + self.unflattened_size + shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# -- attention -----------------------------------------------------------------------------------------------
class MultiHeadAttention(Module):
    """Self-attention over (batch, length, d_model) inputs, built on ``ops.scaled_dot_product_attention``.

    One projection ``qkv`` computes the queries (``num_heads`` heads) and the keys and values
    (``num_kv_heads`` heads each; fewer than ``num_heads`` is grouped-query attention, 1 is multi-query);
    ``out`` projects the concatenated heads back to d_model. ``causal=True`` lets position i attend to
    positions <= i only; ``key_padding_lengths`` (one valid length per batch element) hides the padded
    keys at the end of each sequence.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        dtype=np.float32,
        rng=None,
        device=None,
    ):
        super().__init__()
        on_cpu("MultiHeadAttention", "device", device)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        if num_heads % num_kv_heads:
            raise ValueError(
                f"MultiHeadAttention: num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})"
            )
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.causal = causal
        self.dropout = dropout
        self.rng = rng
        rng = _rng(rng)
        self.qkv = Linear(d_model, (num_heads + 2 * num_kv_heads) * self.head_dim, bias=bias, dtype=dtype, rng=rng)
        self.out = Linear(d_model, d_model, bias=bias, dtype=dtype, rng=rng)

    def forward(self, x, key_padding_lengths=None):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"MultiHeadAttention: expected input of shape (batch, length, {self.d_model}), got {tuple(x.shape)}"
            )
        batch, length, _ = x.shape
        hq, hk, hd = self.num_heads, self.num_kv_heads, self.head_dim
        # (B, L, (Hq + 2 Hk) * hd) -> (B, Hq + 2 Hk, L, hd), then split the heads into q, k, v
        qkv = ops.permute(ops.reshape(self.qkv(x), (batch, length, hq + 2 * hk, hd)), (0, 2, 1, 3))
        q, k, v = ops.split(qkv, [hq, hk, hk], dim=1)  # one op: its backward joins the three gradients at once
        dropout_p = self.dropout if self.training else 0.0
        heads = ops.scaled_dot_product_attention(
            q,
            k,
            v,
            dropout_p=dropout_p,
            is_causal=self.causal,
            enable_gqa=hk != hq,
            key_padding_lengths=key_padding_lengths,
            rng=_rng(self.rng) if dropout_p else None,
        )
        merged = ops.reshape(ops.transpose(heads, 1, 2), (batch, length, hq * hd))
        return self.out(merged)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"causal={self.causal}"
        )


class TransformerBlock(Module):
    """A pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))`` with a GELU MLP.

    ``norm="rms"`` uses RMSNorm instead of LayerNorm; ``dropout`` applies to the attention weights and to
    both residual branches.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        mlp_hidden: int | None = None,
        num_kv_heads: int | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        norm: str = "layer",
        dtype=np.float32,
        rng=None,
        device=None,
    ):
        super().__init__()
        on_cpu("TransformerBlock", "device", device)
        if norm not in ("layer", "rms"):
            raise ValueError(f"TransformerBlock: norm must be 'layer' or 'rms', got {norm!r}")
        rng = _rng(rng)
        norm_class = LayerNorm if norm == "layer" else RMSNorm
        self.norm1 = norm_class(d_model, dtype=dtype)
        self.attn = MultiHeadAttention(
            d_model, num_heads, num_kv_heads, causal=causal, dropout=dropout, dtype=dtype, rng=rng
        )
        self.norm2 = norm_class(d_model, dtype=dtype)
        hidden = 4 * d_model if mlp_hidden is None else mlp_hidden
        self.mlp = Sequential(
            Linear(d_model, hidden, dtype=dtype, rng=rng), GELU(), Linear(hidden, d_model, dtype=dtype, rng=rng)
        )
        self.drop = Dropout(dropout, rng=rng)

    def forward(self, x, key_padding_lengths=None):
        x = x + self.drop(self.attn(self.norm1(x), key_padding_lengths=key_padding_lengths))
        return x + self.drop(self.mlp(self.norm2(x)))


from .op_modules import *  # noqa: E402, F403  -- torch.nn's one-op modules (tape/train/op_modules.py)
from .op_modules import __all__ as _op_modules  # noqa: E402

__all__ += _op_modules
from .mha import MultiheadAttention  # noqa: E402  -- torch's signature and parameter names (tape/train/mha.py)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: E402  -- recurrent layers, built on Module above
from .transformer import (  # noqa: E402  -- torch's Transformer layers (tape/train/transformer.py)
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
