"""`python -m local_substrate serve ...` (cli.py)."""

import sys

from local_substrate.cli import main

sys.exit(main())
