"""Setting OpenTelemetry up for a command-line run from the standard ``OTEL_*`` variables.

Libraries should only use the OpenTelemetry API; this module is for ``planrail run``, which is
an application: when the environment asks for telemetry and no SDK is configured yet, it builds
the providers and exporters the variables name.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from planrail.observe.otel import INSTALL_HINT, MissingExtraError, OtelObserver, require_otel

__all__ = ["configure_from_env"]

_SIGNALS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


def configure_from_env(environ: dict[str, str] | None = None) -> OtelObserver | None:
    """An observer for a command-line run, set up by the standard OpenTelemetry variables.

    - ``OTEL_SDK_DISABLED=true``: none.
    - An SDK already configured in this process (for instance by ``opentelemetry-instrument``):
      an observer on the global providers.
    - Otherwise, when ``OTEL_TRACES_EXPORTER``, ``OTEL_METRICS_EXPORTER`` or
      ``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`` is set: SDK providers exporting by OTLP
      (``otlp``, the default; ``OTEL_EXPORTER_OTLP_PROTOCOL`` picks http/protobuf or grpc),
      ``console`` or ``none``; the resource from ``OTEL_SERVICE_NAME`` and
      ``OTEL_RESOURCE_ATTRIBUTES``. They are flushed when the process exits.
    - Else none, and OpenTelemetry is not imported.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if "opentelemetry.trace" in sys.modules:
        from opentelemetry import trace

        if type(trace.get_tracer_provider()).__name__ not in (
            "ProxyTracerProvider",
            "NoOpTracerProvider",
        ):
            return OtelObserver()
    if not any(env.get(name) for name in _SIGNALS):
        return None
    require_otel()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "planrail")})
    tracer_provider = TracerProvider(resource=resource)
    span_exporter = _exporter(env, "TRACES")
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers = []
    metric_exporter = _exporter(env, "METRICS")
    if metric_exporter is not None:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(metric_exporter))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return OtelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)


def _exporter(env: Any, signal: str) -> Any:
    """The span (``TRACES``) or metric (``METRICS``) exporter the environment asks for."""
    name = env.get(f"OTEL_{signal}_EXPORTER", "otlp").split(",")[0].strip().lower()
    if name == "none":
        return None
    if name == "console":
        if signal == "TRACES":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter(out=sys.stderr)
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    if name != "otlp":
        raise MissingExtraError(
            f"OTEL_{signal}_EXPORTER={name}: planrail supports otlp, console, none"
        )
    protocol = env.get(
        f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL",
        env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    )
    kind = "grpc" if protocol == "grpc" else "http"
    module = "trace_exporter" if signal == "TRACES" else "metric_exporter"
    cls = "OTLPSpanExporter" if signal == "TRACES" else "OTLPMetricExporter"
    try:
        mod = __import__(f"opentelemetry.exporter.otlp.proto.{kind}.{module}", fromlist=[cls])
    except ImportError:
        extra = (
            "pip install opentelemetry-exporter-otlp-proto-grpc" if kind == "grpc" else INSTALL_HINT
        )
        raise MissingExtraError(f"the OTLP {kind} exporter is not installed: {extra}") from None
    return getattr(mod, cls)()
