"""Trace replay of scenarios/trace_mooncake.yaml (the run ends when the trace is sent):
`locust -f locustfiles/trace.py --host http://127.0.0.1:8000 --headless -u 64 -r 64 --csv runs/trace`."""

from llmload import LLMUser


class TraceUser(LLMUser):
    scenario = "scenarios/trace_mooncake.yaml"
