"""multi turn workload from scenarios/multi_turn.yaml: `locust -f locustfiles/multi_turn.py --host http://127.0.0.1:8000`."""

from llmload import LLMUser


class MultiTurnUser(LLMUser):
    scenario = "scenarios/multi_turn.yaml"
