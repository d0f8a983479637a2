"""Workloads whose unit is a task of several calls: agent loops (``agent``), call graphs and the
sessions built from them (``call_graph``, ``graph_session``) and RAG pipelines (``rag_pipeline``). Pure
(given an RNG); the plugin's loops do the sending.

May import, of the workload: ``request``, ``text``, ``distributions`` and ``file.spec``.
"""
