"""A RAG pipeline (embed -> rerank -> chat per task) beside plain embeddings traffic, from
scenarios/rag_pipeline.yaml, one Locust user class per workload:
`locust -f locustfiles/rag_pipeline.py --host http://127.0.0.1:8000`."""

from llmload import users_from_scenario

globals().update(users_from_scenario("scenarios/rag_pipeline.yaml"))
