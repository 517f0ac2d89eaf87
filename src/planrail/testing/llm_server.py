"""A local OpenAI-compatible HTTP server for tests, driven through the real ``openai`` SDK.

::

    with LLMTestServer([Reply.json(plan), "a summary"]) as server:
        llm = OpenAIClient("test-model", base_url=server.url)
        ...
        assert "unknown_tool" in server.requests[1].text

It binds 127.0.0.1 on a free port and serves ``POST /v1/chat/completions`` (plain, and
``stream: true`` as server-sent events with a final usage chunk) and ``GET /v1/models``.
Answers come from a queue (:meth:`LLMTestServer.add`) or a function of the request
(``respond=``). Every request is recorded. :class:`Reply` injects failures: an HTTP error with
``Retry-After``, a body that is not JSON, an empty answer, a delay, or no answer at all (so the
client times out), an answer cut off at ``max_tokens`` (``finish_reason="length"``), a
context-length 400 (:meth:`Reply.context_length`), a stream that sends no usage (``usage=False``).
``json_schema=False`` makes the server refuse JSON-Schema structured output with HTTP 400, as
some local servers do.

``dialect=`` emulates how a provider treats ``response_format`` (see :data:`DIALECTS`):
``"openai"`` takes ``json_schema`` (strict or not) and refuses a ``schema`` inside
``json_object`` with a 400; ``"vllm"`` takes ``json_schema`` and ignores ``strict``;
``"llama_cpp"`` answers ``json_schema`` with HTTP 500 (as llama-cpp-python's server does) and
takes its own ``{"type": "json_object", "schema": ...}``; ``"plain"`` takes no schema at all
(400 on ``json_schema`` and on a ``schema`` in ``json_object``). Refused requests are recorded
like every other.

Standard library only (``http.server`` in a thread): no extra is needed to use it.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DIALECTS", "LLMTestServer", "RecordedRequest", "Reply"]

DIALECTS = ("any", "openai", "vllm", "llama_cpp", "plain")
"""The ``response_format`` behaviours the server can emulate (``any``: accepts everything)."""

_HANG_LIMIT = 30.0
"""Longest a hanging reply holds its connection (the server's stop releases it sooner)."""

_CREATED = 1_700_000_000
"""The ``created`` stamp of every completion: fixed, so a test double's answers do not depend on
when the test ran (clients do not read it)."""


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    """The JSON body (``None`` when there was none or it was not JSON)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages") if isinstance(self.body, dict) else None
        return list(msgs) if isinstance(msgs, list) else []

    @property
    def text(self) -> str:
        """Every message's content, joined by blank lines."""
        return "\n\n".join(str(m.get("content", "")) for m in self.messages)

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def response_format(self) -> Any:
        return self.body.get("response_format") if isinstance(self.body, dict) else None


@dataclass
class Reply:
    """What the server answers to one request."""

    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "scripted failure"
    """The error message of a non-200 reply."""
    input_tokens: int | None = None
    """Default: the number of words in the request's messages."""
    output_tokens: int | None = None
    """Default: the number of words in ``content``."""
    chunks: Sequence[str] | None = None
    """How ``content`` is split when streamed (default: one chunk per line)."""
    before_chunk: Callable[[int], None] | None = None
    """Called (in the server's thread) before chunk ``i`` is sent: a test may block it there."""
    delay: float = 0.0
    """Seconds to wait before answering (a slow server)."""
    hang: bool = False
    """Never answer (until the server stops): the client's timeout fires."""
    raw_body: bytes | None = None
    """Send these bytes as the body instead of a chat completion (malformed responses)."""
    finish_reason: str = "stop"
    """``"length"``: the answer was cut off at ``max_tokens``."""
    usage: bool = True
    """``False``: no usage at all (neither in the body nor as a stream's last chunk)."""

    @classmethod
    def json(cls, data: Any, **options: Any) -> Reply:
        """An answer whose content is ``data`` as JSON text."""
        return cls(json.dumps(data), **options)

    @classmethod
    def fail(cls, status: int, message: str = "scripted failure", **headers: str) -> Reply:
        """An HTTP error; ``Reply.fail(429, retry_after="2")`` sends ``Retry-After: 2``."""
        hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
        return cls(status=status, error=message, headers=hdrs)

    @classmethod
    def timeout(cls) -> Reply:
        """No answer at all: the client times out."""
        return cls(hang=True)

    @classmethod
    def malformed(cls) -> Reply:
        """HTTP 200 with a body that is not JSON."""
        return cls(raw_body=b'{"id": "x", "choices": [')

    @classmethod
    def cut_off(cls, content: str, **options: Any) -> Reply:
        """An answer stopped by ``max_tokens``: ``finish_reason="length"``."""
        return cls(content, finish_reason="length", **options)

    @classmethod
    def context_length(cls, limit: int = 2048, requested: int = 3100) -> Reply:
        """HTTP 400 saying the request does not fit the model's context (OpenAI's wording)."""
        return cls(
            status=400,
            error=f"This model's maximum context length is {limit} tokens. However, you"
            f" requested {requested} tokens. Please reduce the length of the messages.",
        )

    @classmethod
    def empty(cls) -> Reply:
        """A well-formed completion whose content is empty."""
        return cls("")


Responder = Callable[[RecordedRequest], "Reply | str | dict[str, Any] | list[Any]"]


class LLMTestServer:
    """An OpenAI-compatible server on ``127.0.0.1`` for one test (a context manager)."""

    def __init__(
        self,
        answers: Iterable[Reply | str] = (),
        *,
        respond: Responder | None = None,
        json_schema: bool = True,
        dialect: str = "any",
        model: str = "test-model",
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}")
        self.respond = respond
        self.json_schema = json_schema
        self.dialect = dialect
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._answers: deque[Reply | str] = deque(answers)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LLMTestServer:
        handler = type("_Handler", (_Handler,), {"server_ref": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="planrail-llm-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> LLMTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI client (``http://127.0.0.1:PORT/v1``)."""
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ------------------------------------------------------------------ scripting

    def add(self, *answers: Reply | str) -> None:
        """Queue answers, served in order."""
        with self._lock:
            self._answers.extend(answers)

    @property
    def completions(self) -> list[RecordedRequest]:
        """The chat completion requests received, in order."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            source: Any = self._answers.popleft() if self._answers else None
        if source is None and self.respond is not None:
            source = self.respond(request)
        if source is None:
            return Reply.fail(
                500, f"LLMTestServer: no answer scripted for request #{len(self.requests)}"
            )
        if isinstance(source, str):
            return Reply(source)
        if isinstance(source, dict | list):
            return Reply.json(source)
        assert isinstance(source, Reply), f"not a Reply: {source!r}"
        return source


def _refusal(srv: LLMTestServer, fmt: Any) -> tuple[int, str] | None:
    """The HTTP error the emulated provider answers this ``response_format`` with, if any."""
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    with_schema = kind == "json_object" and "schema" in fmt
    if kind == "json_schema" and (not srv.json_schema or srv.dialect == "plain"):
        return 400, "response_format json_schema is not supported"
    if kind == "json_schema" and srv.dialect == "llama_cpp":
        return 500, "'json_schema' is not a valid response_format type"
    if with_schema and srv.dialect in ("openai", "plain"):
        return 400, "Unrecognized request argument supplied: response_format.schema"
    return None


def _words(text: str) -> int:
    return len(text.split())


class _Handler(BaseHTTPRequestHandler):
    server_ref: LLMTestServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            model = self.server_ref.model
            self._send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest("POST", self.path, headers, body)
        srv = self.server_ref
        if not self.path.rstrip("/").endswith("/chat/completions"):
            srv.requests.append(request)
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        refused = _refusal(srv, request.response_format)
        if refused is not None:
            srv.requests.append(request)
            self._send_json(refused[0], {"error": {"message": refused[1]}})
            return
        reply = srv._next(request)
        if reply.hang:
            srv._stopping.wait(_HANG_LIMIT)
            self.close_connection = True
            return
        if reply.delay:
            srv._stopping.wait(reply.delay)
        if reply.status != 200:
            self._send_json(reply.status, {"error": {"message": reply.error}}, reply.headers)
            return
        if reply.raw_body is not None:
            self._send(200, reply.raw_body, "application/json", reply.headers)
            return
        usage = {
            "prompt_tokens": reply.input_tokens
            if reply.input_tokens is not None
            else _words(request.text),
            "completion_tokens": reply.output_tokens
            if reply.output_tokens is not None
            else _words(reply.content),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not reply.usage:
            usage = {}
        model = str(body.get("model") or srv.model) if isinstance(body, dict) else srv.model
        if request.stream:
            self._stream(reply, model, usage, request)
        else:
            self._send_json(
                200,
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": _CREATED,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": reply.finish_reason,
                        }
                    ],
                    **({"usage": usage} if usage else {}),
                },
                reply.headers,
            )

    def _stream(
        self, reply: Reply, model: str, usage: dict[str, int], request: RecordedRequest
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        chunks = reply.chunks
        if chunks is None:
            chunks = reply.content.splitlines(keepends=True) or [reply.content]
        base: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
        }
        for i, piece in enumerate(chunks):
            if reply.before_chunk is not None:
                reply.before_chunk(i)
            delta = {"content": piece, **({"role": "assistant"} if i == 0 else {})}
            self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        end = {"index": 0, "delta": {}, "finish_reason": reply.finish_reason}
        self._event({**base, "choices": [end]})
        options = request.body.get("stream_options") if isinstance(request.body, dict) else None
        if usage and isinstance(options, dict) and options.get("include_usage"):
            self._event({**base, "choices": [], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _event(self, data: dict[str, Any]) -> None:
        self._chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), "application/json", headers or {})

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
