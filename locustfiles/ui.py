"""For the web UI: chat users and a choice of load shapes (start Locust with --class-picker):

    locust -f locustfiles/ui.py --host http://127.0.0.1:8000 --class-picker

Pick Steps, Ramp or Search in the form; their settings (--steps, --search-max, ...) are fields there too.

The LLM tab shows live TTFT/TPOT/ITL, tok/s and errors per scenario; its charts are at
/llmload/dashboard (also linked from the Download Data tab)."""

from llmload import LLMUser, RampLoadShape, SearchLoadShape, StepLoadShape


class ChatUser(LLMUser):
    scenario = "scenarios/chat.yaml"


class Steps(StepLoadShape):
    steps = (4, 8, 16, 32, 64)
    step_seconds = 60


class Ramp(RampLoadShape):
    ramp_users = 64
    ramp_seconds = 300


class Search(SearchLoadShape):
    search_min = 4
    search_max = 64
    search_precision = 4
