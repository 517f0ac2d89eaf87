"""The curated public API: what ``import planrail`` offers is deliberate."""

import planrail

EXPECTED = {
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
    "RunPolicy",
    "RetryableError",
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
}


def test_all_is_pinned() -> None:
    """``planrail.__all__`` changes only together with this list (and the CHANGELOG)."""
    assert set(planrail.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    """Every name in ``__all__`` is importable from the package."""
    for name in planrail.__all__:
        assert getattr(planrail, name) is not None, name


def test_errors_form_one_tree() -> None:
    """Every exported error class descends from ``PlanrailError``."""
    errors = [getattr(planrail, n) for n in planrail.__all__ if n.endswith("Error")]
    assert errors
    for cls in errors:
        assert issubclass(cls, planrail.PlanrailError), cls
