"""A family module's torch case law (``_CASE_LAW``: (op names, text) pairs), joined into each op's ``notes=``: it
then shows in the op's row of docs/coverage.md, and the module docstring keeps to what the module holds."""


def case_law(table: tuple, name: str, own: str = "") -> str:
    """The notes of op ``name``: its own, then every entry of ``table`` naming it, in order."""
    own = own if not own or own.endswith((".", ")")) else own + "."
    return " ".join([own] * bool(own) + [text for names, text in table if name in names])
