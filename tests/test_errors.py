"""The error tree drawn in ``planrail.errors``' docstring is the tree the code defines."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import planrail
import planrail.errors
from planrail.errors import PlanLoadError, PlanrailError, RetryableError, error_dict

OPTIONAL = frozenset(
    {"psycopg", "openai", "anthropic", "opentelemetry", "starlette", "uvicorn", "ray", "mcp"}
)
"""Top-level packages of planrail's extras: a module needing one that is not installed is
skipped (its errors cannot be checked without it)."""

_NAME = re.compile(r"[A-Z]\w*")
_MODULE = re.compile(r"\((\w+(?:\.\w+)+)\)\s*$")
_ALSO = re.compile(r"also an? ([A-Z]\w*)")


@dataclass(frozen=True)
class Drawn:
    """One class as the drawing shows it."""

    parent: str | None
    module: str
    """Where the drawing says it is defined (``planrail.errors`` unless it names a module)."""
    also: frozenset[str]
    """Other parents the line names ("also an X")."""


def drawing() -> dict[str, Drawn]:
    """The tree in ``planrail.errors``' docstring: each class, its parent and its module."""
    doc = planrail.errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, Drawn] = {}
    stack: list[str] = []
    for line in block.splitlines():
        line = line[4:]  # the literal block's indentation
        found = _NAME.search(line)
        assert found is not None, f"no class name on {line!r}"
        depth, name = found.start() // 4, found.group()
        assert name not in drawn, f"{name} is drawn twice"
        del stack[depth:]
        assert len(stack) == depth, f"{name} is indented below no parent"
        where = _MODULE.search(line)
        drawn[name] = Drawn(
            parent=stack[-1] if stack else None,
            module="planrail." + where.group(1) if where else "planrail.errors",
            also=frozenset(_ALSO.findall(line)),
        )
        stack.append(name)
    return drawn


def defined() -> list[type[PlanrailError]]:
    """Every ``PlanrailError`` subclass defined in ``src/planrail`` (all of it imported)."""
    for info in pkgutil.walk_packages(planrail.__path__, "planrail."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise
    found: list[type[PlanrailError]] = []
    todo: list[type[PlanrailError]] = [PlanrailError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("planrail.") and cls not in found:
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_is_drawn_where_it_is() -> None:
    """Each error class defined anywhere in planrail is in the drawing, under its real parent
    (a second parent is named on its line), with the module that defines it — and the drawing
    holds no class the code does not define."""
    drawn = drawing()
    classes = defined()
    names = [c.__name__ for c in classes]
    assert len(names) == len(set(names)), "two error classes share a name"
    assert sorted(drawn) == sorted(names)
    for cls in classes:
        at = drawn[cls.__name__]
        assert at.module == cls.__module__, cls
        bases = {b.__name__ for b in cls.__bases__ if issubclass(b, PlanrailError)}
        if cls is PlanrailError:
            assert at.parent is None
            continue
        assert at.parent in bases, cls
        assert bases - {at.parent} == set(at.also), cls


def test_every_error_class_has_its_own_unique_code() -> None:
    """Every error class sets its own stable ``code`` (none inherits its parent's), and no two
    classes share one."""
    classes = defined()
    missing = [c.__name__ for c in classes if "code" not in vars(c)]
    assert missing == []
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)


def test_every_leaf_error_is_raised_somewhere() -> None:
    """An error class with no subclass is constructed somewhere in ``src/planrail`` (so the
    tree holds no class nobody raises); classes with subclasses are for catching a group, and
    ``RetryableError`` is raised by tools."""
    source = "\n".join(
        p.read_text(encoding="utf-8") for p in Path(planrail.__file__).parent.rglob("*.py")
    )
    never = [
        cls.__name__
        for cls in defined()
        if not cls.__subclasses__()
        and cls is not PlanrailError
        and not re.search(rf"(?<!class )\b{cls.__name__}\(", source)
    ]
    assert never == []


@pytest.mark.parametrize("module", ["planrail.llm", "planrail.observe"])
def test_missing_extra_is_one_class(module: str) -> None:
    """The LLM clients and OpenTelemetry raise the same ``MissingExtraError`` (re-exported by
    their packages), so one ``except`` catches every missing extra."""
    assert importlib.import_module(module).MissingExtraError is planrail.errors.MissingExtraError


def test_error_dict_is_the_json_contracts_error_object() -> None:
    """``error_dict`` gives ``{type, message, retryable}`` from an exception (a planrail error's
    own message and retry flag, another exception's text, the class name for an empty message)
    or from a type name and a message, with ``retryable`` overridable."""
    assert error_dict(RetryableError("busy")) == {
        "type": "RetryableError",
        "message": "busy",
        "retryable": True,
    }
    assert error_dict(ValueError()) == {
        "type": "ValueError",
        "message": "ValueError",
        "retryable": False,
    }
    assert error_dict(KeyError("k"), retryable=True)["retryable"] is True
    assert error_dict("RunError", "it stopped") == {
        "type": "RunError",
        "message": "it stopped",
        "retryable": False,
    }
    assert PlanLoadError("bad").to_dict() == error_dict(PlanLoadError("bad"))
