"""The locustfile every sweep cell runs: LLM users under a step load (flags set the workload, the
steps and their length). A copy of locustfiles/steps.py inside the package, as llmload/demo's."""

from llmload import LLMUser, StepLoadShape


class SweepUser(LLMUser):
    scenario = "chat"
    input_tokens = "256"
    output_tokens = 128


class Steps(StepLoadShape):
    steps = (4, 8)
    step_seconds = 30
