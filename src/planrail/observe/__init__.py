"""Observability: trace files, OpenTelemetry, and drawings of the dependency graph.

Everything here consumes the executor's typed event stream (:mod:`planrail.engine.events`)
through the one :class:`~planrail.types.Observer` interface, or reads what a store kept.
OpenTelemetry is imported only when an :class:`OtelObserver` is made (extra ``[otel]``).
"""

from planrail.observe.graph import COLORS, DepGraph, to_dot, to_mermaid
from planrail.observe.layout import layout, to_svg
from planrail.observe.otel import MissingExtraError, OtelObserver
from planrail.observe.otel_config import configure_from_env
from planrail.observe.trace import TraceError, TraceWriter, read_trace
from planrail.observe.view import REDACTED, RunView, looks_secret, redact

__all__ = [
    "COLORS",
    "REDACTED",
    "DepGraph",
    "MissingExtraError",
    "OtelObserver",
    "RunView",
    "TraceError",
    "TraceWriter",
    "configure_from_env",
    "layout",
    "looks_secret",
    "read_trace",
    "redact",
    "to_dot",
    "to_mermaid",
    "to_svg",
]
