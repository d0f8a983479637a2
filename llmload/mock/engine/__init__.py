"""What a GPU would do, pure and on any clock: what every engine shares (``engine_base``), the batching
engine (``batching_engine``), the fixed one (``fixed_engine``), scheduling policies and the bounded
queue (``priority_engine``), the prefix cache, speculative decoding, the engine's own counters
(``metrics_state``) and closed-loop runs on a virtual clock (``simulate``).

May import, of the mock: nothing; above all nothing of its HTTP layer (``api``, ``front``, the
server).
"""
