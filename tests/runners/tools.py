"""Tools for the runner contract suite: module-level, so Ray workers import them by path.

Every tool writes what it saw to the ledger it is given (``ledger``: a file path) — the start
of each call with its idempotency key and attempt, its end — so a test can check ordering,
data flow and the absence of duplicate effects whichever process ran the call.

A few functions are two or three tools, one per side effect (``flaky`` and ``flaky_keyed``,
``block``, ``block_keyed`` and ``block_unsafe``…): the same code, recorded by the run as a tool
that honours keys or not. A Ray worker imports whichever of the names it finds first; each
calls that code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic

import planrail
from planrail import StepContext

from .ledger import apply_effect, record, unstopped_start


class Out(pydantic.BaseModel):
    step: str
    token: str
    payload: dict[str, Any]


def _start(ledger: str, step: str, ctx: StepContext, **seen: Any) -> None:
    record(ledger, ev="start", step=step, key=ctx.idempotency_key, attempt=ctx.attempt, **seen)


def _finish(
    ledger: str, step: str, ctx: StepContext, inputs: dict[str, Any] | None, fail: bool
) -> Out:
    if fail:
        record(ledger, ev="end", step=step)
        raise ValueError(f"{step} failed on purpose")
    out = Out(
        step=step,
        token=f"{step}@{ctx.run_id}",
        payload={"items": [step, len(inputs or {})], "by": step},
    )
    record(ledger, ev="end", step=step, returned=out.model_dump())
    return out


@planrail.tool(side_effects="none")
def work(
    ctx: StepContext,
    ledger: str,
    step: str,
    inputs: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    items: dict[str, Any] | None = None,
    fail: bool = False,
) -> Out:
    """Sync (CPU-side) probe: record the call and what it received, then return or raise."""
    _start(ledger, step, ctx, inputs=inputs, fields=fields, items=items)
    return _finish(ledger, step, ctx, inputs, fail)


@planrail.tool(side_effects="none")
async def awork(
    ctx: StepContext,
    ledger: str,
    step: str,
    inputs: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    items: dict[str, Any] | None = None,
    fail: bool = False,
) -> Out:
    """Async (I/O-side) probe: the same as :func:`work`, on the event loop or an actor."""
    _start(ledger, step, ctx, inputs=inputs, fields=fields, items=items)
    await asyncio.sleep(0)
    return _finish(ledger, step, ctx, inputs, fail)


def _flaky(ctx: StepContext, ledger: str, step: str, failures: int) -> int:
    """Raise a retryable error on the first ``failures`` attempts; then return the attempt."""
    _start(ledger, step, ctx)
    if ctx.attempt <= failures:
        raise planrail.RetryableError(f"{step}: transient failure {ctx.attempt}", retry_after=0)
    return ctx.attempt


flaky = planrail.tool(side_effects="none", name="flaky")(_flaky)
flaky_keyed = planrail.tool(side_effects="keyed", name="flaky_keyed")(_flaky)


@planrail.tool(side_effects="none")
def broken(ctx: StepContext, ledger: str, step: str) -> int:
    """Always fail with a permanent (non-retryable) error."""
    _start(ledger, step, ctx)
    raise ValueError(f"{step} is broken")


def _backup(ctx: StepContext, ledger: str, step: str, value: int) -> int:
    """A fallback tool: return ``value``."""
    _start(ledger, step, ctx)
    return value


backup = planrail.tool(side_effects="none", name="backup")(_backup)
backup_keyed = planrail.tool(side_effects="keyed", name="backup_keyed")(_backup)


@planrail.tool(side_effects="none")
def numbers(ctx: StepContext, ledger: str, step: str, n: int) -> list[int]:
    """``[0, 1, ..., n - 1]``: a list to fan out over."""
    _start(ledger, step, ctx)
    return list(range(n))


@planrail.tool(side_effects="none")
def series(ctx: StepContext, ledger: str, step: str, n: int) -> list[int]:
    """A large-ish output: ``[0, 1, ..., n - 1]``."""
    _start(ledger, step, ctx)
    return list(range(n))


@planrail.tool(side_effects="none")
def total(ctx: StepContext, ledger: str, step: str, values: Any) -> int:
    """Sum ``values`` — the real list, even when its producer left it in Ray's object store."""
    _start(ledger, step, ctx, kind=type(values).__name__)
    return sum(values)


@planrail.tool(side_effects="none")
def double(ctx: StepContext, ledger: str, step: str, x: int) -> int:
    """One item of a fan-out: ``2 * x``."""
    _start(ledger, step, ctx, x=x)
    return 2 * x


def _began(ledger: str) -> None:
    """Tell the test the call has begun (``Ledger.wait_started``: the test holds the FIFO)."""
    fd = os.open(Path(ledger).parent / "started", os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)


def _release(ledger: str) -> int:
    """The ledger's release FIFO, opened for reading without waiting for a writer: it becomes
    readable when the test lets go (``Ledger.let_go``)."""
    return os.open(Path(ledger).parent / "release", os.O_RDONLY | os.O_NONBLOCK)


async def _ablock(ctx: StepContext, ledger: str, step: str) -> int:
    """Tell the test it has begun; wait until cancelled (recorded), or until the test lets go:
    the loop watches the FIFO."""
    _start(ledger, step, ctx)
    await await_released(ledger, step)
    return 0


ablock = planrail.tool(side_effects="none", name="ablock")(_ablock)
ablock_keyed = planrail.tool(side_effects="keyed", name="ablock_keyed")(_ablock)
ablock_unsafe = planrail.tool(side_effects="unsafe", name="ablock_unsafe")(_ablock)


async def await_released(ledger: str, step: str) -> None:
    """Tell the test the call has begun (``Ledger.wait_started``); wait until it lets go, or
    until cancelled (recorded as ``stopped``)."""
    _began(ledger)
    await _until_released_or_stopped(ledger, step)


async def _until_released_or_stopped(ledger: str, step: str) -> None:
    """Until the test lets go, or until cancelled (recorded as ``stopped``)."""
    try:
        await _until_released(ledger)
    except asyncio.CancelledError:
        record(ledger, ev="stopped", step=step)
        raise


async def _until_released(ledger: str) -> None:
    """Until the test lets go (the loop watches the release FIFO)."""
    loop = asyncio.get_running_loop()
    released = loop.create_future()
    fd = _release(ledger)
    loop.add_reader(fd, lambda: released.done() or released.set_result(None))
    try:
        await released
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _block(ctx: StepContext, ledger: str, step: str) -> int:
    """Sync: tell the test it has begun; wait until interrupted (recorded) or until the test
    lets go."""
    with stop_recorded(ledger, step):
        _start(ledger, step, ctx)
        wait_released(ledger)
    return 0


block = planrail.tool(side_effects="none", name="block")(_block)
block_keyed = planrail.tool(side_effects="keyed", name="block_keyed")(_block)
block_unsafe = planrail.tool(side_effects="unsafe", name="block_unsafe")(_block)


@contextlib.contextmanager
def stop_recorded(ledger: str, step: str) -> Iterator[None]:
    """Ray's graceful cancel of a task inside — a ``KeyboardInterrupt`` in the call's thread —
    is recorded as ``stopped``, then goes on. It may come as soon as the call has begun, even
    between the start's write and the next line: the ledger, not a flag set after the write,
    says whether this call's start is recorded (then its stop is)."""
    try:
        yield
    except KeyboardInterrupt:
        if unstopped_start(ledger, step):
            record(ledger, ev="stopped", step=step)
        raise


def wait_released(ledger: str) -> None:
    """Sync: tell the test the call has begun (``Ledger.wait_started``); wait until it lets go.

    ``select`` returns the moment the FIFO is readable; its timeout only hands control back to
    Python now and then, because Ray's graceful cancel raises ``KeyboardInterrupt`` in this
    thread between bytecodes, never inside a blocking call (:func:`stop_recorded`)."""
    fd = _release(ledger)
    try:
        _began(ledger)
        while not select.select([fd], [], [], 0.05)[0]:
            pass
    finally:
        os.close(fd)


@planrail.tool(side_effects="none")
def block_then_clean(ctx: StepContext, ledger: str, step: str) -> int:
    """Sync: tell the test it has begun and wait; interrupted, clean up for longer than the Ray
    runner takes to send its graceful cancel again (recorded before and after)."""
    _start(ledger, step, ctx)
    fd = _release(ledger)
    try:
        _began(ledger)
        while not select.select([fd], [], [], 0.05)[0]:
            pass
    except KeyboardInterrupt:
        record(ledger, ev="cleaning", step=step)
        clean_until = time.monotonic() + CLEAN_UP_S  # the tool's own work, not a test's wait
        while time.monotonic() < clean_until:
            select.select([fd], [], [], 0.05)
        record(ledger, ev="cleaned", step=step)
        raise
    finally:
        os.close(fd)
    return 0


@planrail.tool(side_effects="none", compute={"num_cpus": 1})
async def ablock_then_clean(ctx: StepContext, ledger: str, step: str) -> int:
    """Async, placed as a Ray task (``compute``): as :func:`block_then_clean`, cancelled."""
    _start(ledger, step, ctx)
    try:
        _began(ledger)
        await _until_released(ledger)
    except asyncio.CancelledError:
        record(ledger, ev="cleaning", step=step)
        await asyncio.sleep(CLEAN_UP_S)  # the tool's own clean-up; a second cancel would end it
        record(ledger, ev="cleaned", step=step)
        raise
    return 0


CLEAN_UP_S = 1.5
"""Three times the interval at which the Ray runner sends a graceful cancel again."""


@planrail.tool(side_effects="none")
def gate(ctx: StepContext, ledger: str, step: str, unlock: str) -> int:
    """Fail until the file ``unlock`` exists (for resume tests)."""
    _start(ledger, step, ctx)
    if not os.path.exists(unlock):
        raise ValueError(f"{step}: locked")
    return 1


# ------------------------------------------------------------------ crashes (Ray only)


@planrail.tool(side_effects="keyed")
def pay_keyed(ctx: StepContext, ledger: str, step: str) -> str:
    """Apply a payment keyed by the idempotency key; the first attempt's worker dies after it."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", ctx.idempotency_key)
    if ctx.attempt == 1:
        os._exit(1)
    return "paid"


@planrail.tool(side_effects="unsafe")
def pay_unsafe(ctx: StepContext, ledger: str, step: str) -> str:
    """Apply a payment with no key; the worker dies right after (its outcome is in doubt)."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", None)
    os._exit(1)


@planrail.tool(side_effects="keyed")
async def apay_keyed(ctx: StepContext, ledger: str, step: str) -> str:
    """:func:`pay_keyed` as an async tool: the actor dies mid-call on the first attempt."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", ctx.idempotency_key)
    await asyncio.sleep(0)
    if ctx.attempt == 1:
        os._exit(1)
    return "paid"


@planrail.tool(side_effects="unsafe")
async def apay_unsafe(ctx: StepContext, ledger: str, step: str) -> str:
    """:func:`pay_unsafe` as an async tool: the actor dies mid-call."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", None)
    await asyncio.sleep(0)
    os._exit(1)


# ------------------------------------------------------------------ effects cut by a timeout


@planrail.tool(side_effects="unsafe")
async def apay_then_wait(ctx: StepContext, ledger: str, step: str) -> str:
    """Apply a payment with no key, then wait for the answer until cancelled (a timeout)."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", None)
    await _until_released_or_stopped(ledger, step)
    return "paid"


@planrail.tool(side_effects="keyed")
async def apay_keyed_then_wait(ctx: StepContext, ledger: str, step: str) -> str:
    """Apply a payment keyed by the idempotency key; the first attempt then waits until it is
    cancelled (a timeout), a later one answers at once."""
    _start(ledger, step, ctx)
    apply_effect(ledger, f"pay:{step}", ctx.idempotency_key)
    if ctx.attempt == 1:
        await _until_released_or_stopped(ledger, step)
    return "paid"


@planrail.tool(side_effects="none", compute={"num_cpus": 2})
def wide(ctx: StepContext, ledger: str, step: str) -> int:
    """Declares two CPUs: on Ray, it runs alone on the two-CPU test runtime."""
    _start(ledger, step, ctx)
    record(ledger, ev="end", step=step)
    return os.getpid()


ALL = [
    work,
    awork,
    flaky,
    flaky_keyed,
    broken,
    backup,
    backup_keyed,
    numbers,
    series,
    total,
    double,
    ablock,
    ablock_keyed,
    ablock_unsafe,
    block,
    block_keyed,
    block_unsafe,
    block_then_clean,
    ablock_then_clean,
    gate,
    pay_keyed,
    pay_unsafe,
    apay_keyed,
    apay_unsafe,
    apay_then_wait,
    apay_keyed_then_wait,
    wide,
]
