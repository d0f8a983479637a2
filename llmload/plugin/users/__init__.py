"""The users and their loops: ``LLMUser`` and every user class (``llm_user``, ``embeddings_user``,
``rerank_user``, ``audio_user``; one class per workload of a scenario file: ``from_scenario``), what
a scenario user's requests come from (``request_source``), the loops a request, a trace entry, an
agent task, a call graph or a RAG pipeline runs in a user's greenlet (``whole_body``,
``trace_replay``, ``agent_loop``, ``graph_loop``, ``pipeline_loop``), the wait after 429/503
(``backoff``) and sending at a due time (``clock``).

May import, of the plugin: ``options``, ``run``, ``cluster`` and the wiring (``get_plugin``, the one
composition root a user class holds). Nothing else of the plugin imports a user.
"""
