"""The package's error base: every error a user can cause derives from it.

The CLI prints an AgentsessionError as one line and exits with its exit_code; anything
else is a bug and keeps its traceback.
"""


class AgentsessionError(Exception):
    """A user-facing error whose message names the place (file, step, op, parameter)."""

    exit_code = 1


class UsageError(AgentsessionError):
    """Bad command-line arguments or parameters."""

    exit_code = 2
