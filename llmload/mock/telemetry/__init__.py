"""What the mock tells about itself: ``/metrics`` in the engines' Prometheus names (``prometheus``),
the simulated GPUs and ``/dcgm/metrics`` (``gpu_telemetry``) and the ground-truth request log
(``request_log``).

May import, of the mock: ``engine``.
"""
