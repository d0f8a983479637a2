"""``LLMEmbeddingsUser``: batches to ``/v1/embeddings``, each answer read whole and held to its
request (one vector per input, every index once, the right dimension): ``protocol_error`` when
it is short or garbled. Latency is t0 to the kernel's receive time of the body's last bytes (the
``e2e_ms`` column); the batch's size goes in ``inputs``, the usage's tokens in ``prompt_tokens``.

Usage::

    class EmbedUser(LLMEmbeddingsUser):
        batch_size = "1-32"          # N, "LOW-HIGH" or a distribution mapping
        input_tokens = 128           # each input's length, the same forms
        encoding_format = "base64"   # or "float"
        dimensions = 256             # or None: whatever the model gives, all of one length
"""

from __future__ import annotations

from typing import Any

from llmload.plugin.users.llm_user import LLMUser
from llmload.plugin.users.whole_body import BodyCalls, body_context, body_transport
from llmload.wire.embeddings import ENCODING_FORMATS
from llmload.workload.distributions import SpecError, parse_distribution
from llmload.workload.endpoints.embeddings import shared_workload


class LLMEmbeddingsUser(LLMUser):
    """Posts batches of texts to ``/v1/embeddings`` (see the module docstring)."""

    abstract = True
    endpoint = "embeddings"

    batch_size: Any = 8
    """Inputs per request: ``N``, ``"LOW-HIGH"`` or a distribution mapping (``{lognormal: {mean: 8, sigma: 1}}``)."""

    input_tokens: Any = 128
    """Each input's length in tokens, the same forms (``--input-tokens`` overrides)."""

    encoding_format: str = "float"
    """``float`` or ``base64`` (little-endian float32)."""

    dimensions: int | None = None
    """The vectors' length to ask for (Matryoshka models); None: the model's, all of one length."""

    def on_start(self) -> None:
        plugin = self.plugin
        cls = type(self)
        name = cls.__name__
        if self.encoding_format not in ENCODING_FORMATS:
            raise ValueError(f"{name}.encoding_format {self.encoding_format!r}: expected float or base64")
        try:
            batch = parse_distribution(self.batch_size, f"{name}.batch_size", minimum=1)
            lengths = parse_distribution(plugin.option("input_tokens") or self.input_tokens,
                                         "--input-tokens" if plugin.option("input_tokens") else f"{name}.input_tokens",
                                         minimum=1)
        except SpecError as e:
            raise ValueError(str(e)) from None
        client = plugin.client_for(self.host, plugin.config.client)
        self.transport = body_transport(self.host, "embeddings", client)
        model = plugin.option("model") or self.model or plugin.resolve_model(self.host, client)
        setup = plugin.setup_for(cls)
        self.scenario_name = setup.scenario_name if setup.scenario_name != "chat" else "embeddings"
        if plugin.spans is not None:  # --otlp-endpoint: what its spans name
            plugin.spans.describe(self.scenario_name, "embeddings", model, self.host)
        self.embeddings = shared_workload(self.scenario_name, model, batch, lengths, self.encoding_format,
                                          self.dimensions, body_context(self))
        self._loop = BodyCalls(self, "embeddings", self.embeddings, self.transport)  # LLMUser's task runs it
        try:
            self.transport.connect()
        except OSError:
            pass  # recorded as connect_error by the first request
