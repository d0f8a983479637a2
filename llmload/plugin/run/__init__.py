"""A run's configuration and life, on the leading process or every one: the configuration checked once
(``config``; how one user class runs: ``user_setup``), the checks before a run starts (``startup``,
``worker_guard``), ``--isolation``'s setup (``isolation_setup``), the server hooks and their clock
(``server_hooks``, ``profile_clock``), steps that must not take each other down (``isolated``), the
parts of a run the roles and views read (``run_parts``), and the options only a shape or a user class
reads, applied or refused (``option_scope``).

May import, of the plugin: ``options`` and ``output``.
"""
