"""Who plays which part of a run and what crosses the wire between processes: the roles (``role``: the
interface and the end of a run; ``roles``: local, master, worker), the links that carry rows and
stats (``links``: the protocol and the worker's side; ``master_link``: the master's), who may join a
run (``membership``), every message, once (``messages``), and where each worker keeps its own copy
of its rows (``worker_copies``).

May import, of the plugin: ``options``, ``run`` and ``output``.
"""
