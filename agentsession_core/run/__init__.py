"""A run: the lifecycle around one load (run.py `Run`): its directory, log, signals, ending,
files, progress line and control API. The load itself is the engine's (engine/load.py)."""
