"""planrail's public test kit: a fake clock and fault-injecting tools (more doubles join here).

Use them to test your own agents the way planrail tests itself — in virtual time, with exact
assertions. See ``docs/policies.md`` for examples.
"""

from planrail.testing.clock import FakeClock
from planrail.testing.faults import (
    ECHO,
    CallRecord,
    FaultTool,
    Hang,
    Slow,
    always_fail,
    fail_times,
    hang,
    http_error,
    probe,
    slow,
)

__all__ = [
    "ECHO",
    "CallRecord",
    "FakeClock",
    "FaultTool",
    "Hang",
    "Slow",
    "always_fail",
    "fail_times",
    "hang",
    "http_error",
    "probe",
    "slow",
]

# The scripted LLM and the local OpenAI-compatible test server (see docs/planning.md).
from planrail.testing.llm import LLMRequest, Scripted, ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, RecordedRequest, Reply

__all__ += ["LLMRequest", "LLMTestServer", "RecordedRequest", "Reply", "Scripted", "ScriptedLLM"]
