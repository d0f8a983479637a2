"""A run's configuration and life, on the leading process or every one: the configuration checked
once (``config``), the checks before a run starts (``startup``, ``worker_guard``), ``--isolation``'s
setup (``isolation_setup``), the server hooks and their clock (``server_hooks``, ``profile_clock``),
steps that must not take each other down (``isolated``) and the parts of a run the roles and views
read (``run_parts``).

May import, of the plugin: ``options`` and ``output``.
"""
