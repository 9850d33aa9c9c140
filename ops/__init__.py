"""minitape's op library, one module per family. Every op is registered in ``tape.registry`` with its
backward rules and samples; ``ops.<name>`` is the op itself (call it on tensors). Each family module
lists its public names in ``__all__``."""
# ruff: noqa: I001  -- the families register in this order; ops/_tensor.py comes after them

from .activation import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .binary import *  # noqa: F401,F403
from .bitwise import *  # noqa: F401,F403
from .cast import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .decompositions import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .movement import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .sampling import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from ._tensor import install as _install_tensor_methods  # last: every family has registered its ops

_install_tensor_methods()  # Tensor's operators and its methods that are not one op (ops/_tensor.py)
