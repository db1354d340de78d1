"""What the workers' fork server loads (worker_process.py has multiprocessing preload this
module there, and only there): the worker, so that a fork need not import it, and the
signals a worker must not die of.

SIGTERM is ignored here, before multiprocessing's fork server sets its own handlers (it
ignores SIGINT itself), and every worker forked from here inherits that: a `kill -TERM -PGID`
for a server started by hand reaches the fork server and the workers too, and the server,
which stops them through their pipes, must be the one to decide. Killed first, the fork
server would take every worker with it (PR_SET_PDEATHSIG) and the pool would start
replacements as it stops.
"""

import signal

from local_substrate import worker  # noqa: F401  (preloaded: each fork has it)

signal.signal(signal.SIGTERM, signal.SIG_IGN)
