"""``python -m jgpy`` (see :mod:`jgpy.cli`)."""

import sys

from jgpy.cli import main

if __name__ == "__main__":
    sys.exit(main())
