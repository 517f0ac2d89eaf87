"""Layer 4½: plans written by a model — the prompt, the schema, the repair loop, replanning.

:class:`Planner` turns a goal and a tool catalog into a validated :class:`~planrail.Plan`,
sending the validator's issues back to the model a bounded number of times.
"""

from planrail.planner.planner import Attempt, Planner, PlanningError, PlanningResult
from planrail.planner.prompt import PLANNER_INSTRUCTIONS, plan_schema
from planrail.planner.retry import LLMRetry
from planrail.planner.stream import StepStream

__all__ = [
    "PLANNER_INSTRUCTIONS",
    "Attempt",
    "LLMRetry",
    "Planner",
    "PlanningError",
    "PlanningResult",
    "StepStream",
    "plan_schema",
]
