"""The workloads of the endpoints that are not chat or completions: embeddings batches
(``embeddings``), rerank and score queries (``rerank``) and audio clips for transcription (``audio``).
Pure and seeded.

May import, of the workload: ``text`` and ``distributions``.
"""
