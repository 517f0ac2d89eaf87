"""Layer 4: LLM clients behind one small protocol, and budgets for their use.

``LLM.complete(messages, schema=...)`` → :class:`LLMResponse` (text, parsed JSON, usage).
Provider packages are imported lazily, inside the clients: importing this package never
imports ``openai`` or ``anthropic``.
"""

from planrail.llm.base import LLM, LLMResponse, LLMStream, Message, Usage
from planrail.llm.budget import Budget, BudgetMeter, MeteredLLM, Price, PriceTable
from planrail.llm.errors import (
    BudgetExceededError,
    LLMAnswerError,
    LLMContextLengthError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
    MissingExtraError,
)
from planrail.llm.jsontext import extract_json
from planrail.llm.models import open_llm, split_model_name

__all__ = [
    "LLM",
    "Budget",
    "BudgetExceededError",
    "BudgetMeter",
    "LLMAnswerError",
    "LLMContextLengthError",
    "LLMError",
    "LLMRequestError",
    "LLMResponse",
    "LLMStream",
    "LLMUnavailableError",
    "Message",
    "MeteredLLM",
    "MissingExtraError",
    "Price",
    "PriceTable",
    "Usage",
    "extract_json",
    "open_llm",
    "split_model_name",
]
