"""The terminal adapter: the read-side ``sessionq`` commands and their presentation.

Owns: the click commands over the engine (reads, traces, search, ``rpc``,
``serve``, ``export``), the plumbing every command shares with the indexer's
commands (exit statuses, ``--db`` and ``--root`` defaults, JSON output) and the
rich tables and trees people see.

Imports: anything in :mod:`readmodel` (it is the top layer).
"""
