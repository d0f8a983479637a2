"""Model and LoRA-adapter mixes of scenarios/lora_mix.yaml, one Locust user class per workload:
`locust -f locustfiles/lora_mix.py --host http://127.0.0.1:8000`, against
`llmload mock --model base-model --lora-adapters 16 --max-loras 4 --lora-load-ms 200`.

Every row names its model (the `model` column); the LLM tab, PREFIX_llm_stats.csv and the report
break every metric down per model, and `--slo adapter-1:ttft_p95_ms=800` judges one adapter alone.
"""

from llmload import users_from_scenario

globals().update(users_from_scenario("scenarios/lora_mix.yaml"))
