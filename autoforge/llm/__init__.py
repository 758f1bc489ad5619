"""The LLM client: one interface, an OpenAI-compatible backend and the offline default.

Stage modules do::

    from autoforge.llm import get_client
    client = get_client(settings, recorder=recorder, cache=cache)
    if client.is_offline:
        result = offline_rule(...)
    else:
        result = client.structured("state_schema", prompts.state_schema(...), StateSchema)

Prompt templates live with the step that uses them (``autoforge.envs.prompts`` etc.; the shared
helpers are :mod:`autoforge.llm.prompting`). A warehouse-backed cache is read by the pipeline
(``autoforge.pipeline.llm_cache.load_llm_cache``) and handed in as ``cache``.
"""

from autoforge.llm.cache import MemoryCache, ResponseCache, WarehouseCache, prompt_hash
from autoforge.llm.client import (
    BACKENDS,
    ChatReply,
    LLMClient,
    LLMInvalidReply,
    LLMRequestError,
    OfflineClient,
    OpenAIClient,
    get_client,
)
from autoforge.llm.messages import parse_json_content, to_openai_messages
from autoforge.llm.record import MemoryRecorder, Recorder
from autoforge.llm.retry import RetryPolicy

__all__ = [
    "BACKENDS",
    "ChatReply",
    "LLMClient",
    "LLMInvalidReply",
    "LLMRequestError",
    "MemoryCache",
    "MemoryRecorder",
    "OfflineClient",
    "OpenAIClient",
    "Recorder",
    "ResponseCache",
    "RetryPolicy",
    "WarehouseCache",
    "get_client",
    "parse_json_content",
    "prompt_hash",
    "to_openai_messages",
]
