"""Shipping tools to other processes by import path, and refusing those that cannot go.

A worker process never receives a tool's code: it receives a :data:`Locator` (a module and the
module-level name bound to the tool, or the ``.py`` file ``--tools`` loaded it from) and imports
it. A tool that no import path reaches — a closure, a lambda, a function defined in the
``__main__`` script — is refused before the run starts, with one line saying why; when it could
not be pickled either (it holds a lock, a socket, an open file), the line says that too.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from planrail.errors import ToolError
from planrail.plan.catalog import load_tools
from planrail.plan.tools import Tool

__all__ = ["Locator", "ToolShippingError", "locate", "resolve"]

Locator = tuple[str, str, str]
"""``("module", module_name, attribute)`` or ``("file", path, tool_name)``."""

_FILE_PREFIX = "_planrail_tools_"
"""The module names :func:`planrail.plan.catalog.load_tools` gives ``.py`` files it loads."""


class ToolShippingError(ToolError):
    """A tool cannot be sent to the workers that would run it (refused before the run)."""

    code = "tool_not_shippable"


def locate(tool: Tool) -> Locator:
    """How a worker imports ``tool``; :class:`ToolShippingError` (one line) when it cannot."""
    fn = tool.fn
    module_name = getattr(fn, "__module__", None) or type(fn).__module__
    module = sys.modules.get(module_name)
    if module is not None and module_name != "__main__":
        for attr, value in vars(module).items():
            if isinstance(value, Tool) and value.fn is fn:
                if module_name.startswith(_FILE_PREFIX) and getattr(module, "__file__", None):
                    return ("file", str(module.__file__), value.name)
                return ("module", module_name, attr)
    raise ToolShippingError(
        f"tool '{tool.name}' cannot be sent to Ray workers: {_where(fn, module_name)}; workers"
        f" import tools by path, so define it at module level in an importable module"
        f"{_pickling(fn)}"
    )


def _where(fn: Any, module_name: str) -> str:
    qualname = getattr(fn, "__qualname__", type(fn).__qualname__)
    if "<locals>" in qualname:
        outer = qualname.split(".<locals>")[0]
        return f"it is a closure (defined inside {outer}())"
    if "<lambda>" in qualname:
        return "it is a lambda"
    if module_name == "__main__":
        return "it is defined in the __main__ script"
    return f"no module-level name of {module_name} holds it"


def _pickling(fn: Any) -> str:
    """``"; it cannot be pickled either: <why>"`` when ``fn`` does not pickle, else ``""``."""
    dumps: Any
    try:
        from ray.cloudpickle import dumps
    except ImportError:  # pragma: no cover - only reached without the [ray] extra
        from pickle import dumps
    try:
        dumps(fn)
    except Exception as exc:
        return f" (it cannot be pickled either: {str(exc).splitlines()[0] if str(exc) else exc!r})"
    return ""


_RESOLVED: dict[Locator, Tool] = {}
"""Tools a worker process has already imported."""


def resolve(locator: Locator) -> Tool:
    """The tool ``locator`` names, imported in this process (once)."""
    found = _RESOLVED.get(locator)
    if found is not None:
        return found
    kind, where, name = locator
    if kind == "file":
        by_name = {t.name: t for t in load_tools(where)}
        if name not in by_name:
            raise ToolShippingError(f"{where} has no tool named '{name}'")
        found = by_name[name]
    else:
        value = getattr(importlib.import_module(where), name, None)
        if not isinstance(value, Tool):
            raise ToolShippingError(f"{where}.{name} is not a planrail tool")
        found = value
    _RESOLVED[locator] = found
    return found
