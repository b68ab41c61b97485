"""A fake OpenAI-compatible chat endpoint on 127.0.0.1 that misbehaves on cue.

The network is the boundary: everything on our side of it (the openai client, its retries,
the pipeline) runs for real against this server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeEndpoint:
    """POST /v1/chat/completions on 127.0.0.1.

    By default it answers ``echo:<user text>`` after ``delay`` seconds. ``faults[user text]``
    lists what to do on successive attempts at that text ("429:<Retry-After>", "500", "400",
    "hang", "garbage", "bare", "sleep:<seconds>", "ok"); once the list is used up the last entry repeats.
    """

    def __init__(self, delay: float = 0.0, responder: Callable[[dict], str | dict] | None = None, port: int = 0):
        """``port``: 0 for any free one; a given one lets a test bring an endpoint back where a client
        found nothing listening."""
        self.delay = delay
        # What an "ok" answer says, from the request body (default: echo:<user text>).
        self.responder = responder
        self.faults: dict[str, list[str]] = {}
        self.bodies: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.attempts: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        return len(self.bodies)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate small writes

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = user_text(body)
                with endpoint.lock:
                    endpoint.bodies.append(body)
                    endpoint.headers.append({k.lower(): v for k, v in self.headers.items()})
                    attempt = endpoint.attempts[text]
                    endpoint.attempts[text] += 1
                    endpoint.in_flight += 1
                    endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)
                plan = endpoint.faults.get(text, ["ok"])
                answer = self.answer(plan[min(attempt, len(plan) - 1)], text, body)
                with endpoint.lock:  # before the answer leaves, so the client cannot overtake the count
                    endpoint.in_flight -= 1
                if answer is None:
                    self.close_connection = True
                    return
                status, payload, headers = answer
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(payload, bytes) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def answer(self, action: str, text: str, body: dict) -> tuple[int, dict | bytes, dict[str, str]] | None:
                if action == "hang":
                    endpoint.stopping.wait(10)
                    return None
                if action.startswith("429"):
                    retry_after = action.partition(":")[2]
                    return 429, {"error": {"message": "slow down"}}, {"Retry-After": retry_after} if retry_after else {}
                if action == "500":
                    # retry-after-ms keeps the client's backoff short in the bounded-retry test
                    return 500, {"error": {"message": "boom"}}, {"retry-after-ms": "10"}
                if action == "400":
                    return 400, {"error": {"message": "bad model"}}, {}
                if action == "garbage":
                    return 200, b"<html>not json</html>", {}
                if action == "bare":  # no usage, as some servers answer
                    return (
                        200,
                        {
                            "id": "c",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "fake",
                            "choices": [
                                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
                            ],
                        },
                        {},
                    )
                time.sleep(float(action.partition(":")[2]) if action.startswith("sleep") else endpoint.delay)
                content = endpoint.responder(body) if endpoint.responder else f"echo:{text}"
                # A responder may give the message's fields instead of its text: content,
                # reasoning_content or reasoning (as reasoning servers send), finish_reason.
                message = {"role": "assistant", **(content if isinstance(content, dict) else {"content": content})}
                finish_reason = message.pop("finish_reason", "stop")
                # ... and the answer's logprobs ({"content": [{token, logprob, top_logprobs}]}), as vLLM's server sends.
                logprobs = message.pop("logprobs", None)
                return (
                    200,
                    {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {"index": 0, "finish_reason": finish_reason, "message": message, "logprobs": logprobs}
                        ],
                        "usage": {
                            "prompt_tokens": len(text),
                            "completion_tokens": 3,
                            "total_tokens": len(text) + 3,
                            "prompt_tokens_details": {"cached_tokens": 2},
                        },
                    },
                    {},
                )

        return Handler


def user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else next(p["text"] for p in content if p["type"] == "text")
