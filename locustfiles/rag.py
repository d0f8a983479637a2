"""rag workload from scenarios/rag.yaml: `locust -f locustfiles/rag.py --host http://127.0.0.1:8000`.

Against `llmload mock` (its default profile, vllm-v1, caches prefixes) the summary shows the
prefix-cache hit ratio next to the one the scenario makes possible, e.g. 0.872 of at most 0.925.
"""

from llmload import LLMUser


class RagUser(LLMUser):
    scenario = "scenarios/rag.yaml"
