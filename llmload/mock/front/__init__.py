"""The mock's HTTP front, between a socket and the engine: request framing (``http_request``), taking
a request in (``intake``), the streaming endpoints (``completion``) and the stream served for one
request (``served_stream``), the whole-body and transcription endpoints (``body_endpoints``,
``audio_serve``), turning arrivals away at a full queue (``admission``), LoRA adapters' slots
(``lora``) and injected faults (``faults``).

May import, of the mock: ``api``, ``engine`` and ``telemetry``.
"""
