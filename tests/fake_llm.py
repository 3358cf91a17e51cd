"""A scripted OpenAI-compatible chat-completions server on loopback, for testing the LLM paths.

It speaks the real protocol over real HTTP. Each request takes the next scripted answer: a correct one,
a late one, an HTTP error, truncated or invalid JSON, a huge body, or none at all (the connection hangs).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat_body(content: str, prompt_tokens: int = 50, completion_tokens: int = 20) -> bytes:
    return json.dumps({"id": "chatcmpl-test", "object": "chat.completion", "model": "fake",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}).encode()


class FakeLLMServer:
    """``script`` entries: ("ok", content) | ("late", seconds, content) | ("status", code) |
    ("status_body", code, bytes) |
    ("raw", bytes) | ("huge", nbytes) | ("hang", seconds)."""

    def __init__(self) -> None:
        self.script: deque[tuple[Any, ...]] = deque()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "body": json.loads(self.rfile.read(length) or b"{}")})
                action = server.script.popleft() if server.script else ("status", 503)
                kind = action[0]
                try:
                    if kind == "hang":
                        time.sleep(action[1])
                        return
                    if kind == "late":
                        time.sleep(action[1])
                        body, code = chat_body(action[2]), 200
                    elif kind == "ok":
                        body, code = chat_body(action[1]), 200
                    elif kind == "status":
                        body, code = b'{"error": {"message": "scripted failure"}}', action[1]
                    elif kind == "status_body":
                        body, code = action[2], action[1]
                    elif kind == "raw":
                        body, code = action[1], 200
                    elif kind == "huge":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(action[1]))
                        self.end_headers()
                        chunk = b" " * 65536
                        for _ in range(action[1] // len(chunk)):
                            self.wfile.write(chunk)
                        return
                    else:
                        raise ValueError(kind)
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def fake_llm_server() -> Iterator[FakeLLMServer]:
    srv = FakeLLMServer()
    try:
        yield srv
    finally:
        srv.close()
