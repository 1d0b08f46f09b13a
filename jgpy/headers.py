"""Header types of the JGroups 2.12 protocols (fields only; the wire layout is in the dialect).

The classes are generated from the dialect spec (``jgpy/_core/spec212.py``): every header class it describes is
here under its name.
"""

from jgpy._core.headers import *  # noqa: F401,F403
from jgpy._core.headers import __all__  # noqa: F401
