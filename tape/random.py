"""One random-number policy: ``tape.Generator``, the default generator and torch's seeding functions.

A ``Generator`` *is* a ``numpy.random.Generator`` (a subclass over PCG64) with torch's seeding methods, so
every op or layer that takes ``rng=``/``generator=`` accepts either kind. Reseeding (``manual_seed``,
``seed``, ``set_state``) changes the bit generator's state in place: whoever holds the object -- a layer,
a recorded op attribute, a compiled step's plan -- draws from the reseeded stream, exactly as after
``torch.manual_seed``.

Everything that draws without being given a generator draws from ``default_generator`` (seeded with 0 at
import, so a fresh process is deterministic): layer initialisation (tape.nn), dropout's mask seed,
attention's dropout seed and the creation functions of ops/creation.py. ``manual_seed(s)`` reseeds it.
"""

from __future__ import annotations

import copy

import numpy as np

from .checks import integer, require

__all__ = [
    "Generator",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
]  # and as_generator, the ``generator=`` argument's reader for the ops and layers

_SEED_RANGE = (-(2**63), 2**64)  # torch's: a long long or an unsigned one; negatives wrap modulo 2**64


def _seed_value(where: str, value) -> int:
    value = integer(where, "seed", value)
    require(_SEED_RANGE[0] <= value < _SEED_RANGE[1], where, "seed", "an int in [-2**63, 2**64)", value)
    return value % 2**64


class Generator(np.random.Generator):
    """torch.Generator's interface over numpy's PCG64 generator: ``manual_seed(seed)`` (returns self),
    ``seed()`` (a fresh nondeterministic seed, returned), ``initial_seed()``, ``get_state()`` / ``set_state()``.
    Draws are numpy's (``g.random(...)``, ``g.normal(...)``): the streams are not torch's."""

    def __init__(self, seed: int | None = None):
        seed = _fresh_seed() if seed is None else _seed_value("Generator", seed)
        super().__init__(np.random.PCG64(seed))
        self._initial_seed = seed

    def manual_seed(self, seed: int) -> Generator:
        self._initial_seed = _seed_value("Generator.manual_seed", seed)
        self.bit_generator.state = np.random.PCG64(self._initial_seed).state
        return self

    def seed(self) -> int:
        self.manual_seed(_fresh_seed())
        return self._initial_seed

    def initial_seed(self) -> int:
        return self._initial_seed

    def get_state(self) -> dict:
        """A copy of the bit generator's state (a dict; torch's is a uint8 tensor); ``set_state`` restores it."""
        return copy.deepcopy(dict(self.bit_generator.state))

    def set_state(self, state: dict) -> Generator:
        if not isinstance(state, dict) or state.get("bit_generator") != "PCG64":
            raise TypeError(
                "Generator.set_state: argument 'state' expected a state from Generator.get_state() "
                f"(a dict with bit_generator 'PCG64'), got {type(state).__name__}"
            )
        self.bit_generator.state = copy.deepcopy(state)
        return self

    # numpy's Generator pickles (and so copies) as a plain numpy Generator: keep the class and the seed
    def __reduce__(self):
        return _rebuild, (self._initial_seed, self.get_state())

    def __repr__(self) -> str:
        return f"tape.Generator(initial_seed={self._initial_seed})"


def _rebuild(initial_seed: int, state: dict) -> Generator:
    g = Generator(initial_seed)
    g.set_state(state)
    return g


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator (in place) and return it, as ``torch.manual_seed``."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator nondeterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)


def as_generator(where: str, generator) -> np.random.Generator:
    """The generator to draw from: ``generator`` itself (a tape.Generator or any numpy Generator), or the
    default generator for None. Anything else is refused, naming ``where``."""
    if generator is None:
        return default_generator
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(
        f"{where}: argument 'generator' expected None, a tape.Generator or a numpy.random.Generator, "
        f"got {type(generator).__name__}"
    )
