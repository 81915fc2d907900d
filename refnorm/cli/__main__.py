"""``python -m refnorm.cli``: the command line (refnorm/cli/__init__.py)."""
import sys

from . import main

sys.exit(main())
