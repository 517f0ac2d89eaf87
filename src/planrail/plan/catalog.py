"""Loading tools: every ``@planrail.tool`` of a module or ``.py`` file, and catalog files.

A catalog is a JSON file holding a list of tools, or ``{"tools": [...]}``, each either in MCP
form (``name``, ``description``, ``inputSchema``, ``outputSchema``) or in OpenAI function form
(``{"type": "function", "function": {"name", "description", "parameters"}}``). An optional
``x-planrail`` object carries planrail's own metadata (``side_effects``, ``resource``, ...);
MCP's ``annotations.readOnlyHint`` / ``idempotentHint`` map to ``side_effects``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import signal
import sys
from pathlib import Path
from typing import Any

from planrail.errors import PlanLoadError, ToolLoadError, error_message
from planrail.plan.loader import PlanLimits, load_document, read_bounded
from planrail.plan.tools import SideEffects, Tool, ToolSpec

__all__ = ["load_catalog", "load_tools", "parse_catalog"]

MAX_CATALOG_BYTES = 64 * 1024 * 1024
"""The largest catalog file read (64 MiB: some 100,000 tools described at length)."""
_SIDE_EFFECTS = ("none", "idempotent", "keyed", "unsafe")
_CATALOG_LIMITS = PlanLimits(
    max_plan_bytes=MAX_CATALOG_BYTES,
    max_nodes=MAX_CATALOG_BYTES,  # as many values and as long texts as the size holds
    max_string_length=MAX_CATALOG_BYTES,
)
"""How a catalog is read: as a plan file is, nested at most as deep (64 levels: a tool's
schemas sit three levels down), bounded only by its size otherwise."""


def load_tools(target: str) -> list[Tool]:
    """Import ``target`` (``pkg.module`` or a path to a ``.py`` file) and return its tools."""
    path = Path(target)
    try:
        if target.endswith(".py") or path.is_file():
            if not path.is_file():
                raise ToolLoadError(f"--tools {target}: no such file")
            stat = path.stat()  # a file edited since it was loaded is loaded again
            key = f"{path.resolve()}:{stat.st_mtime_ns}:{stat.st_size}"
            digest = hashlib.sha1(key.encode()).hexdigest()[:10]
            mod_name = f"_planrail_tools_{path.stem}_{digest}"
            module = sys.modules.get(mod_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(mod_name, path)
                if spec is None or spec.loader is None:
                    raise ToolLoadError(f"--tools {target}: cannot load this file as Python")
                module = importlib.util.module_from_spec(spec)
                sys.modules[mod_name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[mod_name]
                    raise
        else:
            cwd = str(Path.cwd())
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            module = importlib.import_module(target)
    except ToolLoadError:
        raise
    except ModuleNotFoundError as exc:
        raise ToolLoadError(f"--tools {target}: module not found ({exc.name})") from exc
    except SyntaxError as exc:
        raise ToolLoadError(
            f"--tools {target}: syntax error at line {exc.lineno}: {exc.msg}"
        ) from exc
    except Exception as exc:
        raise ToolLoadError(
            f"--tools {target}: importing it raised {type(exc).__name__}: {error_message(exc)}"
        ) from exc
    except KeyboardInterrupt:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            raise  # Python's own Ctrl-C handling: it may be one, and goes on as one
        raise ToolLoadError(  # a Ctrl-C is handled elsewhere (the planrail command exits 130)
            f"--tools {target}: importing it raised KeyboardInterrupt; a tools file must not exit"
        ) from None
    except SystemExit as exc:  # a tools file may not end the process
        raise ToolLoadError(
            f"--tools {target}: importing it raised SystemExit({exc.code!r});"
            " a tools file must not exit"
        ) from None
    except BaseException as exc:  # GeneratorExit, a BaseException subclass of the file's own
        raise ToolLoadError(
            f"--tools {target}: importing it raised {type(exc).__name__}: {error_message(exc)},"
            " which is not an Exception; a tools file must only define tools"
        ) from None
    tools = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not tools:
        raise ToolLoadError(f"--tools {target}: no @planrail.tool functions found")
    return tools


def load_catalog(path: str | Path) -> list[ToolSpec]:
    """Read a catalog JSON file; :class:`ToolLoadError` with the reason if it is not one."""
    try:
        text = read_bounded(path, MAX_CATALOG_BYTES, "the catalog", "MAX_CATALOG_BYTES")
    except PlanLoadError as exc:  # cannot be read, too big (a device that never ends), not UTF-8
        raise ToolLoadError(f"--catalog {exc.message}") from exc
    try:  # read as plan files are: nested too deep, a huge integer, a repeated key are said
        data = load_document(text, _CATALOG_LIMITS, fmt="json", what="the catalog")
    except PlanLoadError as exc:
        raise ToolLoadError(f"--catalog {path}: {exc.message}") from exc
    return parse_catalog(data, source=str(path))


def parse_catalog(data: Any, *, source: str = "catalog") -> list[ToolSpec]:
    """Tool specs from catalog data (a list of tools, or ``{"tools": [...]}``)."""
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise ToolLoadError(f'{source}: expected a list of tools or {{"tools": [...]}}')
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        spec = _entry(entry, f"{source}: tool #{i}")
        if spec.name in seen:
            raise ToolLoadError(f"{source}: tool {spec.name!r} is defined twice")
        seen.add(spec.name)
        specs.append(spec)
    return specs


def _entry(entry: Any, where: str) -> ToolSpec:
    if not isinstance(entry, dict):
        raise ToolLoadError(f"{where}: expected an object")
    if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
        fn = entry["function"]
        name, desc = fn.get("name"), fn.get("description", "")
        input_schema, output_schema = fn.get("parameters"), fn.get("x-output-schema")
        extra = {**fn.get("x-planrail", {}), **entry.get("x-planrail", {})}
        hints: dict[str, Any] = {}
    else:
        name, desc = entry.get("name"), entry.get("description", "")
        input_schema = entry.get("inputSchema", entry.get("input_schema"))
        output_schema = entry.get("outputSchema", entry.get("output_schema"))
        extra = entry.get("x-planrail", {})
        hints = entry.get("annotations") or {}
    if not isinstance(name, str) or not name.strip():
        raise ToolLoadError(f"{where}: a tool needs a non-empty string 'name'")
    where = f"{where} ({name})"
    if input_schema is None:
        input_schema = {"type": "object"}
    for label, schema in (("input schema", input_schema), ("output schema", output_schema)):
        if schema is not None and not isinstance(schema, dict):
            raise ToolLoadError(f"{where}: the {label} must be a JSON object")
    if not isinstance(desc, str):
        raise ToolLoadError(f"{where}: 'description' must be a string")
    if not isinstance(extra, dict) or not isinstance(hints, dict):
        raise ToolLoadError(f"{where}: 'x-planrail' and 'annotations' must be objects")
    side: Any = extra.get("side_effects")
    if side is None:
        if hints.get("readOnlyHint") is True:
            side = "none"
        elif hints.get("idempotentHint") is True:
            side = "idempotent"
        else:
            side = "unsafe"
    if side not in _SIDE_EFFECTS:
        raise ToolLoadError(f"{where}: side_effects must be one of {_SIDE_EFFECTS}, got {side!r}")
    side_effects: SideEffects = side
    timeout = _typed(extra, "timeout", float, where, positive=True)
    secrets = extra.get("secret_params", [])
    if not isinstance(secrets, list) or not all(isinstance(x, str) for x in secrets):
        raise ToolLoadError(f"{where}: x-planrail.secret_params must be a list of parameter names")
    retry = extra.get("retry")
    if retry is not None and not isinstance(retry, dict):
        raise ToolLoadError(f"{where}: x-planrail.retry must be an object (a retry policy)")
    return ToolSpec(
        name=name,
        description=desc,
        input_schema=input_schema,
        output_schema=output_schema,
        side_effects=side_effects,
        retry=retry,
        timeout=timeout,
        resource=_typed(extra, "resource", str, where),
        requires_approval=_typed(extra, "requires_approval", bool, where),
        secret_params=frozenset(secrets),
        estimated_duration=_typed(extra, "estimated_duration", float, where, positive=True),
        trusted=bool(_typed(extra, "trusted", bool, where)),
    )


def _typed(extra: dict[str, Any], key: str, kind: type, where: str, positive: bool = False) -> Any:
    """``extra[key]`` checked to be of ``kind`` (numbers: int or float; optionally > 0)."""
    value = extra.get(key)
    if value is None:
        return None
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and (not positive or value > 0)
        what = "a positive number" if positive else "a number"
    else:
        ok = isinstance(value, kind)
        what = {str: "a string", bool: "true or false"}.get(kind, kind.__name__)
    if not ok:
        raise ToolLoadError(f"{where}: x-planrail.{key} must be {what}, got {value!r}")
    return value
