"""minitape's op library, one module per family. Every op is registered in ``tape.registry`` with its
backward rules and samples; ``ops.<name>`` is the op itself (call it on tensors). Each family module
lists its public names in ``__all__``."""

import sys as _sys

from tape.tensors import bind_operators as _bind_operators

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

_bind_operators(_sys.modules[__name__])
