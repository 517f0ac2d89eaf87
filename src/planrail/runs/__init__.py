"""The one run path: every way into planrail builds its run here.

``planrail.run/arun/prepare``, the CLI's ``run``, ``plan`` and ``resume``,
:class:`planrail.agent.Agent` and ``planrail mcp serve`` all call :func:`prepare` (or
:func:`resume`), which **compiles** the plan (validation; :mod:`planrail.plan.effects`), hands
the run its **gate** (the approver and the security policy) and its **record** (store,
observers), and returns the
:class:`~planrail.Execution` that **executes** it through the tool runner. See
``docs/architecture.md``.
"""

from planrail.runs.build import arun, prepare, resume, run

__all__ = ["arun", "prepare", "resume", "run"]
