"""The one random-number policy (tape/random.py): tape.Generator, tape.manual_seed and every drawer routed to it."""

import copy
import pickle

import numpy as np
import pytest

import ops
import tape
from tape import nn


def test_a_seed_gives_one_stream_and_reseeding_restarts_it():
    g = tape.Generator(5)
    first = g.random(6)
    assert g.manual_seed(5) is g  # torch's manual_seed returns the generator
    np.testing.assert_array_equal(g.random(6), first)
    assert not np.array_equal(tape.Generator(6).random(6), first)
    assert isinstance(g, np.random.Generator)  # accepted wherever a numpy Generator is


def test_initial_seed_and_torch_seed_range(torch):
    for s in (0, 7, -1, -(2**63), 2**64 - 1):
        assert tape.Generator(s).initial_seed() == torch.Generator().manual_seed(s).initial_seed()
    for bad, error in ((1.5, TypeError), (True, TypeError), ("3", TypeError), (2**64, ValueError)):
        with pytest.raises(error, match="argument 'seed' expected an int"):
            tape.Generator().manual_seed(bad)


def test_seed_is_fresh_and_reported():
    g = tape.Generator(1)
    s = g.seed()
    assert g.initial_seed() == s and s != 1
    draws = g.random(3)
    np.testing.assert_array_equal(tape.Generator(s).random(3), draws)


def test_state_round_trip_and_copies():
    g = tape.Generator(11)
    g.random(4)
    state = g.get_state()
    expected = g.random(5)
    g.random(7)
    g.set_state(state)
    np.testing.assert_array_equal(g.random(5), expected)
    g.set_state(state)
    for twin in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert type(twin) is tape.Generator and twin.initial_seed() == 11
        np.testing.assert_array_equal(twin.random(5), expected)
    np.testing.assert_array_equal(g.random(5), expected)  # the copies did not advance g
    with pytest.raises(TypeError, match="Generator.set_state: argument 'state'"):
        g.set_state({"bit_generator": "MT19937"})


def test_manual_seed_reseeds_the_default_generator_in_place():
    held = tape.default_generator
    assert tape.manual_seed(3) is held
    a = held.random(4)
    tape.manual_seed(3)
    np.testing.assert_array_equal(tape.default_generator.random(4), a)
    assert tape.initial_seed() == 3
    state = tape.get_rng_state()
    b = held.random(2)
    tape.set_rng_state(state)
    np.testing.assert_array_equal(held.random(2), b)


def test_layers_initialise_from_the_default_generator():
    nn.manual_seed(4)  # nn.manual_seed is tape.manual_seed
    w1 = nn.Linear(3, 2).weight.numpy()
    tape.manual_seed(4)
    np.testing.assert_array_equal(nn.Linear(3, 2).weight.numpy(), w1)
    assert nn.manual_seed is tape.manual_seed


def test_dropout_without_rng_is_reproducible_under_manual_seed():
    x = tape.tensor(np.ones((8, 8)))
    tape.manual_seed(9)
    a = ops.dropout(x, 0.5).numpy()
    tape.manual_seed(9)
    np.testing.assert_array_equal(ops.dropout(x, 0.5).numpy(), a)
    np.testing.assert_array_equal(ops.dropout(x, 0.5, rng=tape.Generator(9)).numpy(), a)
    with pytest.raises(TypeError, match="dropout: argument 'rng'"):
        ops.dropout(x, 0.5, rng="seed")


def test_attention_dropout_without_rng_is_reproducible_under_manual_seed():
    q = tape.tensor(np.random.default_rng(0).normal(size=(1, 2, 4, 3)))

    def run():
        return ops.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()

    tape.manual_seed(2)
    a = run()
    tape.manual_seed(2)
    np.testing.assert_array_equal(run(), a)
    g = tape.Generator(2)
    b = ops.scaled_dot_product_attention(q, q, q, dropout_p=0.5, rng=g).numpy()
    np.testing.assert_array_equal(b, a)  # the default generator is a tape.Generator seeded the same way
