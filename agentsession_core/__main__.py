import sys

from agentsession_core.cli import main

sys.exit(main())
