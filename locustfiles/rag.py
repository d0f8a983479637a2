"""rag workload from scenarios/rag.yaml: `locust -f locustfiles/rag.py --host http://127.0.0.1:8000`."""

from llmload import LLMUser


class RagUser(LLMUser):
    scenario = "scenarios/rag.yaml"
