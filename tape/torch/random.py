"""``torch.random``: the seeding functions of the one default generator (tape/random.py), as at the top level."""

from tape.random import get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"]
