"""What a run writes and shows from its finished records: the CSVs (``run_files``), ``PREFIX_run.json``
(``run_manifest``), the live window and its history (``live``), the end-of-run text
(``end_of_run``), a record in Locust's own table and events (``locust_table``), the OpenTelemetry
spans (``span_export``, ``span_sdk``) and llmload's own Prometheus metrics (``prometheus_export``).
The exporters read records and rows, never a user.

May import, of the plugin: ``options`` only.
"""
