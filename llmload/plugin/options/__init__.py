"""llmload's command-line options for Locust and what they check into: the flags (``flags``), the
connection, fault and server-metrics settings (``option_checks``), what a master's options carry to its
workers (``shipped_options``) and what a start from the web UI may change (``web_form``).

May import, of the plugin: nothing. The bottom of the plugin: every other room may import it.
"""
