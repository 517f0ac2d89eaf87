"""How much OpenTelemetry work a step span needs: none, the SDK's, or a finished span handed over.

:func:`children_sampled` says whether spans under a run span can be recorded at all (when they
cannot, the observer builds none: no per-step tracer call). :class:`DirectSpans` is the cheap
way to emit a step span when something samples it: the span is already finished when the
observer makes it (start and end times come from the events), so instead of the SDK's
``start_span`` + ``end`` (a mutable span, locks, attribute validation, the sampler, then a
read-only copy for the processors) it builds the read-only span the SDK would have built and
gives it to the span processors' ``on_end``. It is used only when that is provably the same
thing: an SDK tracer whose processors are the SDK's batch or simple processors (their
``on_start`` does nothing), whose sampler follows a sampled parent (``ParentBased``, the
default), with no span-attribute length limit and no SDK self-metrics; anything else — and any
span with events or child spans — goes through ``start_span``. Nothing here imports
OpenTelemetry until it is called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DirectSpans", "children_sampled"]

_MAX_ATTRIBUTES = 16
"""The most attributes a directly emitted span carries (the span limit must allow them)."""


def _static(sampler: Any, decision: str) -> bool:
    """Whether ``sampler`` is the SDK's ``StaticSampler`` always deciding ``decision``."""
    from opentelemetry.sdk.trace.sampling import Decision, StaticSampler

    return (
        type(sampler) is StaticSampler and getattr(sampler, "_decision", None) is Decision[decision]
    )


def children_sampled(tracer: Any, run_span: Any) -> bool:
    """Whether spans under ``run_span`` may be recorded. Not when it is not and the sampler
    drops every child of an unsampled local parent (``ParentBased``, the SDK's default), when
    the sampler drops everything (``ALWAYS_OFF``), or with no SDK at all."""
    if run_span.is_recording():
        return True
    sampler = getattr(tracer, "sampler", None)
    if sampler is None:  # the API's no-op (or proxy) tracer: nothing is recorded
        return False
    from opentelemetry.sdk.trace.sampling import ParentBased

    if isinstance(sampler, ParentBased):
        return not _static(getattr(sampler, "_local_parent_not_sampled", None), "DROP")
    return not _static(sampler, "DROP")


class DirectSpans:
    """Finished spans handed straight to an SDK tracer's span processors (see the module)."""

    def __init__(self, tracer: Any, trace_flags: Any) -> None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext

        self._readable = ReadableSpan
        self._context = SpanContext
        self._new_id = tracer.id_generator.generate_span_id
        self._on_end = tracer.span_processor.on_end
        self._resource = tracer.resource
        self._info = tracer.instrumentation_info
        self._scope = tracer._instrumentation_scope
        self._flags = trace_flags
        self.pending: list[Any] = []
        """Spans made and not yet handed to the processors (see :meth:`flush`)."""

    @classmethod
    def under(cls, tracer: Any, run_span: Any) -> DirectSpans | None:
        """The direct way for the children of ``run_span``, or None where it would not be the
        SDK's own result (then spans go through ``tracer.start_span``)."""
        try:
            if not _direct_safe(tracer, run_span):
                return None
            from opentelemetry.trace import TraceFlags

            parent = run_span.get_span_context()
            random = parent.trace_flags & TraceFlags.RANDOM_TRACE_ID
            return cls(tracer, TraceFlags(TraceFlags.SAMPLED | random))
        except (AttributeError, ImportError, TypeError):  # another SDK version: the SDK's way
            return None

    def span(
        self,
        name: str,
        parent: Any,
        attributes: dict[str, Any],
        start: int,
        end: int,
        status: Any = None,
    ) -> Any:
        """The finished span ``name`` under the span context ``parent``: its context now, the
        span itself to the processors at the next :meth:`flush` (in the order they ended)."""
        ctx = self._context(parent.trace_id, self._new_id(), False, self._flags, parent.trace_state)
        self.pending.append((name, ctx, parent, attributes, start, end, status))
        return ctx

    def flush(self) -> None:
        """Hand the pending spans to the span processors (``on_end``), in order."""
        readable, on_end = self._readable, self._on_end
        for name, ctx, parent, attributes, start, end, status in self.pending:
            extra = {} if status is None else {"status": status}
            on_end(
                readable(
                    name,
                    ctx,
                    parent,
                    self._resource,
                    attributes,
                    instrumentation_info=self._info,
                    start_time=start,
                    end_time=end,
                    instrumentation_scope=self._scope,
                    **extra,
                )
            )
        self.pending.clear()


def _direct_safe(tracer: Any, run_span: Any) -> bool:
    """Whether a span built here is exactly what ``tracer.start_span`` + ``end`` would export
    under the sampled, recording ``run_span``."""
    from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, Tracer
    from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased

    if type(tracer) is not Tracer or not tracer._is_enabled():
        return False
    if not (run_span.is_recording() and run_span.get_span_context().trace_flags.sampled):
        return False
    sampler = tracer.sampler
    if not isinstance(sampler, ParentBased):
        return False
    if not _static(sampler._local_parent_sampled, "RECORD_AND_SAMPLE"):
        return False
    limits = tracer._span_limits
    if limits.max_span_attribute_length is not None:
        return False
    if limits.max_span_attributes is not None and limits.max_span_attributes < _MAX_ATTRIBUTES:
        return False
    if type(tracer._tracer_metrics) is not NoOpTracerMetrics:
        return False
    processor = tracer.span_processor
    if type(processor) is not SynchronousMultiSpanProcessor:
        return False
    kinds = (BatchSpanProcessor, SimpleSpanProcessor)
    return all(type(p) in kinds for p in processor._span_processors)
