"""``torch.utils.checkpoint``: ``checkpoint(function, *args)`` is ``function(*args)`` -- torch's activation
checkpointing trades memory for a recomputation and changes no value or gradient, so running the function once
keeps its results exactly (minitape saves what each op's rule needs)."""


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):  # fmt: skip
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002  -- torch's name
    """The modules of ``functions`` (a Sequential or a list) applied in order to ``input``."""
    for f in functions.children() if hasattr(functions, "children") else functions:
        input = f(input)
    return input
