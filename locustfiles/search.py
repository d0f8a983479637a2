"""Chat users under a capacity search: bisection over measured steps for the highest user count
that meets every SLO, then the run ends and prints how many steps it took.

    locust -f locustfiles/search.py --headless --host http://127.0.0.1:8000 --csv runs/search \
           --slo ttft_p95_ms=2000 --search users --search-min 4 --search-max 128 --search-precision 4
"""

from llmload import LLMUser, SearchLoadShape


class ChatUser(LLMUser):
    scenario = "chat"
    input_tokens = "200-400"
    output_tokens = 128


class Search(SearchLoadShape):
    search_min = 4
    search_max = 64
    search_precision = 4
