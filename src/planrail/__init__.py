"""planrail: plans as dependency graphs for multi-step LLM agents.

Validated before anything runs, approved by a person, executed by dependency.
"""

from planrail.engine.approval import (
    ApprovalRequest,
    ApprovalRequiredError,
    approve_all,
    defer,
    refuse_all,
)
from planrail.engine.events import Event, EventType
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult, StepResult
from planrail.engine.runners import LocalRunner
from planrail.errors import (
    ApprovalRefusedError,
    ArgumentError,
    OutputError,
    PlanError,
    PlanLoadError,
    PlanrailError,
    PlanValidationError,
    ReferenceResolutionError,
    RetryableError,
    StoreError,
    ToolError,
)
from planrail.plan.catalog import load_catalog, load_tools
from planrail.plan.define import tool
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan, Step
from planrail.plan.secrets import Secret
from planrail.plan.tools import (
    StepContext,
    Tool,
    ToolProtocol,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
)
from planrail.plan.validate import Issue, ValidationReport, load_plan, validate
from planrail.policies.limits import ResourceLimit, RunPolicy
from planrail.policies.retry import RetryPolicy
from planrail.policies.security import SecurityPolicy
from planrail.runs import arun, prepare, resume, run
from planrail.store import open_store
from planrail.types import StepStatus

__version__ = "0.1.0.dev0"

__all__ = [
    "ApprovalRefusedError",
    "ApprovalRequest",
    "ApprovalRequiredError",
    "ArgumentError",
    "Event",
    "EventType",
    "Execution",
    "Issue",
    "LocalRunner",
    "OutputError",
    "Plan",
    "PlanError",
    "PlanLimits",
    "PlanLoadError",
    "PlanValidationError",
    "PlanrailError",
    "ReferenceResolutionError",
    "ResourceLimit",
    "RetryPolicy",
    "RetryableError",
    "RunPolicy",
    "RunResult",
    "Secret",
    "SecurityPolicy",
    "Step",
    "StepContext",
    "StepResult",
    "StepStatus",
    "StoreError",
    "Tool",
    "ToolError",
    "ToolProtocol",
    "ToolRegistry",
    "ToolRunner",
    "ToolSpec",
    "ValidationReport",
    "__version__",
    "approve_all",
    "arun",
    "defer",
    "load_catalog",
    "load_plan",
    "load_tools",
    "open_store",
    "prepare",
    "refuse_all",
    "resume",
    "run",
    "tool",
    "validate",
]
