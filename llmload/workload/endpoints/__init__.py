"""The workloads of the endpoints that are not chat or completions: embeddings batches
(``embeddings``), rerank and score queries (``rerank``), audio clips for transcription (``audio``),
and what every whole-body workload hands its user (``body``: each endpoint's ``from_spec`` named in
:data:`llmload.wire.endpoints.ENDPOINTS` makes one). Pure and seeded.

May import, of the workload: ``text``, ``distributions``, ``file.spec`` and ``scenario_workload``
(its ``stable_seed``).
"""
