"""Records to table rows and back, shared by every backend so they agree on JSON handling.

JSON fields become compact JSON text (``None`` becomes ``"null"``, so JSON columns are never SQL
NULL); key order and the exact text are kept, which makes a resumed run see byte-identical data.
A lone surrogate in a JSON string (an error message quoting a file name Python decoded with
``surrogateescape``) is written as its JSON escape (``\\udce9``), which every backend keeps and
which reads back as the same string; text columns (ids, keys, ``reason``) cannot hold one, nor
NUL (PostgreSQL's text cannot), so every backend refuses both alike with a ``StoreError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from planrail._json import encoder
from planrail.errors import StoreCorruptError, StoreError
from planrail.plan.strict_json import escape_surrogates, lone_surrogate
from planrail.store.base import (
    Event,
    IdempotencyConflictError,
    Intent,
    Lease,
    RunNotFoundError,
    RunRecord,
    StepRecord,
)

RUN_COLUMNS = (
    "run_id",
    "plan",
    "plan_hash",
    "status",
    "created_at",
    "updated_at",
    "output",
    "approval",
    "error",
    "metadata",
)
STEP_COLUMNS = (
    "run_id",
    "step_id",
    "status",
    "attempts",
    "idempotency_key",
    "args",
    "args_hash",
    "output",
    "error",
    "reason",
    "started_at",
    "finished_at",
    "degraded",
    "attempt_history",
    "metadata",
)
EVENT_COLUMNS = ("run_id", "seq", "type", "at", "step_id", "attempt", "data")
INTENT_COLUMNS = ("run_id", "step_key", "idempotency_key", "args_hash")
LEASE_COLUMNS = ("run_id", "owner", "expires_at")

Row = tuple[Any, ...]

_encode = encoder(ensure_ascii=False, allow_nan=False)


_EMPTY = {type(None): "null", dict: "{}", list: "[]"}
"""The JSON text of the values most fields hold (no output yet, no error, no history)."""


def _not_json(what: str, exc: Exception) -> StoreError:
    return StoreError(f"cannot store {what}: it is not plain JSON data ({exc})")


def dump(value: Any, what: str, *names: Any) -> str:
    """``value`` as JSON text; a value JSON cannot hold is a ``StoreError`` naming ``what``
    (formatted with ``names``, if given, only then: the fields of many records are dumped).
    The values most fields hold need no encoder."""
    if not value:
        empty = _EMPTY.get(type(value))
        if empty is not None:
            return empty
    try:
        encoded = _encode(value)
    except (TypeError, ValueError) as exc:
        raise _not_json(what.format(*names) if names else what, exc) from None
    if encoded.isascii() or lone_surrogate(encoded) is None:
        return encoded
    return _escaped(encoded, what.format(*names) if names else what)


_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escaped(text: str, what: str) -> str:
    """JSON ``text`` whose strings hold lone surrogates (raw, which no UTF-8 driver encodes),
    with each spelled as its JSON escape: the same JSON value, as text every backend keeps.
    (Surrogates only ever stand inside JSON strings: the rest of JSON text is ASCII.) A high
    surrogate followed by a low one would read back as the one character the pair encodes,
    another string: refused."""
    pair = _PAIR.search(text)
    if pair is not None:
        raise StoreError(
            f"cannot store {what}: a string holds the surrogates {pair.group()!r} side by side,"
            " which JSON cannot tell from the character they encode"
        )
    return escape_surrogates(text)


_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def plain(joined: str) -> bool:
    """Whether the texts ``joined`` (as one f-string: ``None`` is written ``None``) surely fit
    a text column, being ASCII without NUL: one check of a row's texts, so that the rows a
    group commit encodes by the thousand pay little; when it says no, :func:`text` finds and
    names the field."""
    return joined.isascii() and "\x00" not in joined


def text(value: Any, what: str, *names: Any) -> Any:
    """``value`` for a text column, refused with a ``StoreError`` naming ``what`` when it
    holds NUL or a lone surrogate: PostgreSQL's text cannot hold NUL and no UTF-8 store a
    surrogate, so no backend takes either (they agree). ``None`` and non-text pass as given."""
    if type(value) is not str or (value.isascii() and "\x00" not in value):
        return value
    found = _NOT_TEXT.search(value)
    if found is None:
        return value
    char = "NUL" if found.group() == "\x00" else f"the lone surrogate {found.group()!r}"
    raise StoreError(
        f"cannot store {what.format(*names) if names else what}: {value!r} holds {char},"
        " which a store's text columns cannot hold"
    )


def load(text: Any, what: str) -> Any:
    if not isinstance(text, str):
        raise StoreCorruptError(f"{what} is not JSON text (found {type(text).__name__})")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(f"{what} holds invalid JSON ({exc})") from None


def encode_run(r: RunRecord) -> Row:
    what = f"run {r.run_id!r}"
    if not plain(f"{r.run_id}{r.plan_hash}"):
        text(r.run_id, "the id of {}", what)
        text(r.plan_hash, "the plan hash of {}", what)
    return (
        r.run_id,
        dump(r.plan, f"the plan of {what}"),
        r.plan_hash,
        r.status,
        float(r.created_at),
        float(r.updated_at),
        dump(r.output, f"the output of {what}"),
        dump(r.approval, f"the approval of {what}"),
        dump(r.error, f"the error of {what}"),
        dump(r.metadata, f"the metadata of {what}"),
    )


def decode_run(row: Sequence[Any]) -> RunRecord:
    what = f"run {row[0]!r}"
    try:
        return RunRecord(
            run_id=row[0],
            plan=load(row[1], f"the plan of {what}"),
            plan_hash=row[2],
            status=row[3],
            created_at=row[4],
            updated_at=row[5],
            output=load(row[6], f"the output of {what}"),
            approval=load(row[7], f"the approval of {what}"),
            error=load(row[8], f"the error of {what}"),
            metadata=load(row[9], f"the metadata of {what}"),
        )
    except ValueError as exc:
        raise StoreCorruptError(f"{what} cannot be read: {exc}") from None


def encode_step(s: StepRecord) -> Row:
    sid, rid = s.step_id, s.run_id
    if not plain(f"{rid}{sid}{s.idempotency_key}{s.args_hash}{s.reason}"):
        text(rid, "the run id of step {!r}", sid)
        of = "the {} of step {!r} of run {!r}"
        fields: tuple[tuple[str, str | None], ...] = (
            ("id", sid),
            ("idempotency key", s.idempotency_key),
            ("args hash", s.args_hash),
            ("reason", s.reason),
        )
        for name, value in fields:
            text(value, of, name, sid, rid)
    return (
        rid,
        sid,
        s.status.value,
        s.attempts,
        s.idempotency_key,
        dump(s.args, "the args of step {!r} of run {!r}", sid, rid),
        s.args_hash,
        dump(s.output, "the output of step {!r} of run {!r}", sid, rid),
        dump(s.error, "the error of step {!r} of run {!r}", sid, rid),
        s.reason,
        None if s.started_at is None else float(s.started_at),
        None if s.finished_at is None else float(s.finished_at),
        bool(s.degraded),
        dump(s.attempt_history, "the attempt history of step {!r} of run {!r}", sid, rid),
        dump(s.metadata, "the metadata of step {!r} of run {!r}", sid, rid),
    )


def decode_step(row: Sequence[Any]) -> StepRecord:
    what = f"step {row[1]!r} of run {row[0]!r}"
    try:
        return StepRecord(
            run_id=row[0],
            step_id=row[1],
            status=row[2],
            attempts=row[3],
            idempotency_key=row[4],
            args=load(row[5], f"the args of {what}"),
            args_hash=row[6],
            output=load(row[7], f"the output of {what}"),
            error=load(row[8], f"the error of {what}"),
            reason=row[9],
            started_at=row[10],
            finished_at=row[11],
            degraded=bool(row[12]),
            attempt_history=load(row[13], f"the attempt history of {what}"),
            metadata=load(row[14], f"the metadata of {what}"),
        )
    except ValueError as exc:
        raise StoreCorruptError(f"{what} cannot be read: {exc}") from None


def encode_event(e: Event) -> Row:
    """The event's row; the store fills in ``seq`` (index 1)."""
    what = "the {} of event {!r} of run {!r}"
    data = dump(e.data, what, "data", e.type, e.run_id)
    if not plain(f"{e.run_id}{e.type}{e.step_id}"):
        for name, value in (("run id", e.run_id), ("type", e.type), ("step id", e.step_id)):
            text(value, what, name, e.type, e.run_id)
    return (e.run_id, e.seq, e.type, float(e.at), e.step_id, e.attempt, data)


def decode_event(row: Sequence[Any]) -> Event:
    return Event(
        run_id=row[0],
        seq=row[1],
        type=row[2],
        at=row[3],
        step_id=row[4],
        attempt=row[5],
        data=load(row[6], f"the data of event {row[1]} of run {row[0]!r}"),
    )


def encode_intent(i: Intent) -> Row:
    row = (i.run_id, i.step_key, i.idempotency_key, i.args_hash)
    if not plain(f"{i.run_id}{i.step_key}{i.idempotency_key}{i.args_hash}"):
        what = "the {} of the intent {!r} of run {!r}"
        for name, value in zip(
            ("run id", "step key", "idempotency key", "args hash"), row, strict=True
        ):
            text(value, what, name, i.idempotency_key, i.run_id)
    return row


def storable(params: Sequence[Any]) -> bool:
    """Whether every text in ``params`` is one a text column can hold (see :func:`text`)."""
    return plain("".join([p for p in params if type(p) is str])) or all(
        type(p) is not str or _NOT_TEXT.search(p) is None for p in params
    )


def check_lease_text(run_id: str, owner: str) -> None:
    """Refuse a lease whose run id or owner no backend's text columns can hold."""
    text(run_id, "the run id of a lease of {!r}", owner)
    text(owner, "the owner of a lease of run {!r}", run_id)


def decode_intent(row: Sequence[Any]) -> Intent:
    return Intent(run_id=row[0], step_key=row[1], idempotency_key=row[2], args_hash=row[3])


def decode_lease(row: Sequence[Any]) -> Lease:
    return Lease(run_id=row[0], owner=row[1], expires_at=row[2])


def conflict(intent: Intent, recorded_hash: str) -> StoreError:
    return IdempotencyConflictError(
        f"idempotency key {intent.idempotency_key!r} of run {intent.run_id!r} was recorded "
        f"with args hash {recorded_hash!r} and is now used with {intent.args_hash!r}; "
        "a key must always carry the same arguments",
        run_id=intent.run_id,
        step_id=intent.step_key,
    )


def missing_run(run_id: str) -> StoreError:
    return RunNotFoundError(
        f"run {run_id!r} does not exist: create it (or pass it as commit(run=...)) before "
        "writing its steps, events or intents",
        run_id=run_id,
    )
