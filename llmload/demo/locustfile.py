"""The locustfile `llmload demo` runs: chat users under a step load. (A copy of
locustfiles/steps.py that ships inside the package, so the demo works from an installed llmload.)"""

from llmload import LLMUser, StepLoadShape


class ChatUser(LLMUser):
    scenario = "chat"
    input_tokens = "200-400"
    output_tokens = 32


class Steps(StepLoadShape):
    steps = (8, 16, 32, 48, 64)
    step_seconds = 20
