"""``llmload mock``: the simulated server. The process and its settings are here (``server``,
``options``, ``launch``, ``profiles``); the rooms below hold the rest: ``api`` (what each endpoint
accepts and answers), ``front`` (the HTTP front between a socket and the engine), ``engine`` (what a
GPU would do) and ``telemetry`` (what the mock tells about itself).

May import, of llmload: ``wire``, ``net`` and ``argtypes`` only; the client never imports the mock.
"""
