"""What each optional section of a report adds to its steps: priority classes and ``--isolation``
(``classes``), the per-model breakdown (``models``), call-graph sessions (``sessions``), production-shaped
traffic (``traffic``), the prefix-cache truth (``prefix_truth``), and the server's and the GPUs' side of
each step (``server``, ``gpu``, over the long-format reader ``metrics_csv``), and each replica of a
fleet apart (``replicas``).

May import, of the report: the plain parts it builds on (``format``, ``model``, ``steps``, ``load``) and
the other sections; never ``build``, ``render`` or ``compare``.
"""
