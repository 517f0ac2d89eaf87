"""``llm_call`` steps: moved to :mod:`planrail.runs.llm_step` (every way in uses it)."""

from planrail.runs.llm_step import LLMStepHandler, step_messages

__all__ = ["LLMStepHandler", "step_messages"]
