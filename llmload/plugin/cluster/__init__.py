"""Who plays which part of a run and what crosses the wire between processes: the roles (``roles``:
local, master, worker behind one interface), the links that carry rows and stats (``links``), who may
join a run (``membership``) and every message, once (``messages``).

May import, of the plugin: ``options``, ``run`` and ``output``.
"""
