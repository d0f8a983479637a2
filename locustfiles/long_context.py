"""long context workload from scenarios/long_context.yaml: `locust -f locustfiles/long_context.py --host http://127.0.0.1:8000`."""

from llmload import LLMUser


class LongContextUser(LLMUser):
    scenario = "scenarios/long_context.yaml"
