"""Tooling over the registry: sample-based verification (``verify``), the coverage matrix (``coverage``) and
the command line (``cli``, ``python -m tape``)."""
