"""A scripted OpenAI-compatible chat-completions server on loopback, for testing the LLM paths.

It speaks the real protocol over real HTTP. Each request takes the next scripted answer: a correct one,
a late one, an HTTP error, truncated or invalid JSON, a huge body, or none at all (the connection hangs).
A request is first matched to the memroute step whose prompt it carries (:func:`step_of`); a step with
its own script in ``by_step`` answers from it, every other request from ``script``.

``python -m tests.fake_llm`` serves forever with :func:`contract_model`, a script that answers every
step within its contract, so that ``memroute eval recall|route --llm URL`` can be run end to end without
a model (docs/llm.md: the figures measure the plumbing, never the quality of a model).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memroute.llm.prompts import estimate_tokens


def chat_body(content: str, prompt_tokens: int = 50, completion_tokens: int | None = 20) -> bytes:
    """A chat completion; ``completion_tokens=None`` is estimated from the text as memroute's budget does."""
    completion_tokens = estimate_tokens(content) if completion_tokens is None else completion_tokens
    return json.dumps({"id": "chatcmpl-test", "object": "chat.completion", "model": "fake",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}).encode()


_STEP_MARKERS = (("rerank", "<memories>"), ("route_rerank", "CANDIDATES:"), ("expand", '"expanded_queries"'),
                 ("keywords", '{"keywords"'), ("intents", '{"intents"'), ("slots", '"target_feature"'))


def contract_model(body: dict[str, Any]) -> str:
    """Answers every memroute step within its contract, from the prompt alone: expansion repeats the
    utterance plus "details", the recall rerank marks the first two memories shown medium, keywords are the
    query's first five words, no intent label, route rerank scores 0.9, 0.8, ... down the agents shown."""
    step, prompt = step_of(body), user_prompt(body)
    if step == "expand":
        utterance = re.search(r"<utterance>\n(.*?)\n</utterance>", prompt, re.S)
        text = utterance.group(1).rstrip("?？") if utterance else ""
        return json.dumps({"expanded_queries": [f"{text} details"], "detected_references": []})
    if step == "rerank":
        ids = re.findall(r'<memory id="(\d+)"', prompt)[:2]
        return json.dumps({"relevant": [{"id": i, "relevance": "medium", "reason": "scripted"} for i in ids],
                           "injection_strategy": "quote_key_parts"})
    if step == "keywords":
        query = re.search(r"<query>\n(.*?)\n</query>", prompt, re.S)
        return json.dumps({"keywords": query.group(1).split()[:5] if query else []})
    if step == "intents":
        return json.dumps({"intents": []})
    if step == "route_rerank":
        ids = re.findall(r"^#\d+ id=(\S+)$", prompt, re.M)
        scores = [{"id": i, "score": round(max(0.9 - 0.1 * k, 0.0), 2)} for k, i in enumerate(ids)]
        return json.dumps({"scores": scores})
    return "{}"


def step_of(body: dict[str, Any]) -> str:
    """Which memroute prompt a chat-completions request carries ("" for anything else)."""
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    return next((step for step, marker in _STEP_MARKERS if marker in text), "")


def user_prompt(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


class FakeLLMServer:
    """``script`` entries: ("ok", content) | ("late", seconds, content) | ("status", code) |
    ("status_body", code, bytes) | ("raw", bytes) | ("huge", nbytes) | ("hang", seconds) | ("trickle", seconds) |
    ("fn", callable(request body) -> content): a model that reads the prompt. An empty script answers 503."""

    def __init__(self) -> None:
        self.script: deque[tuple[Any, ...]] = deque()
        self.forever: Callable[[dict[str, Any]], str] | None = None
        """When set, answers every request that no script does, with usage estimated from the text."""
        self.by_step: dict[str, deque[tuple[Any, ...]]] = {}
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                step = step_of(body)
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                        "step": step})
                queue = server.by_step.get(step) or server.script
                action = queue.popleft() if queue else ("forever",) if server.forever else ("status", 503)
                if action[0] == "fn":
                    answer: Callable[[dict[str, Any]], str] = action[1]
                    action = ("ok", answer(body))
                kind = action[0]
                try:
                    if kind == "forever" and server.forever is not None:
                        tokens = sum(estimate_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
                        out, code = chat_body(server.forever(body), tokens, None), 200
                    elif kind == "hang":
                        time.sleep(action[1])
                        return
                    elif kind == "late":
                        time.sleep(action[1])
                        out, code = chat_body(action[2]), 200
                    elif kind == "ok":
                        out, code = chat_body(action[1]), 200
                    elif kind == "status":
                        out, code = b'{"error": {"message": "scripted failure"}}', action[1]
                    elif kind == "status_body":
                        out, code = action[2], action[1]
                    elif kind == "raw":
                        out, code = action[1], 200
                    elif kind == "trickle":  # a byte every 0.1 s: each read is quick, the whole answer is not
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                        for _ in range(int(action[1] / 0.1)):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.1)
                        return
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
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
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


if __name__ == "__main__":
    srv = FakeLLMServer()
    srv.forever = contract_model
    print(f"scripted OpenAI-compatible server (no model) at {srv.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.close()
