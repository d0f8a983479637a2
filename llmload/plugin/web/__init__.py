"""The web UI: its routes (``webui``), the LLM tabs' columns and rows (``llm_tab``), the narrow views
of a run it and the load shapes read (``views``), and the dashboard's page and script (``static/``).

May import, of the plugin: ``cluster``, ``run``, ``output`` and ``options``; never a user.
"""
