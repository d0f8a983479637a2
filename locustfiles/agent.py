"""Agent tasks (tool loops) from scenarios/agent.yaml:
`locust -f locustfiles/agent.py --host http://127.0.0.1:8000 --headless -u 16 -r 16 -t 2m --csv runs/agent`."""

from llmload import LLMUser


class AgentUser(LLMUser):
    scenario = "scenarios/agent.yaml"
