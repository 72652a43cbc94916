"""``python -m hil``: the ``hil`` command."""
import sys

from .cli import main

sys.exit(main())
