"""Local fakes of OpenAI's Batch API and Anthropic's Message Batches, with faults on cue.

The hosted APIs are the boundary we cannot reach; the openai and anthropic clients, and all of
gamut on our side, run for real against these. Each fake counts how often every custom_id was
submitted (``submissions``): "nothing paid twice" is that every count is 1.

A created batch takes the next entry of ``behaviours`` (then "complete"):
  complete  answered once ``polls`` status reads have passed (default 1) and ``held`` is clear
  fail      failed, no output
  expire    expired with the first half of its requests answered
Output faults (OpenAI): ``reverse`` answers out of order, ``duplicate`` repeats the first line,
``refuse`` picks the lines answered with an error line,
``garble`` those whose output line is cut short (unreadable JSON, no custom_id).
``upload_faults``: statuses the next uploads answer with.
``runner``: a function (input JSONL path, output JSONL path) that answers a batch instead of the
responder (``vllm run-batch``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Responder = Callable[[dict], str]


def chat_completion(body: dict, content: str) -> dict:
    text = json.dumps(body["messages"])
    return {
        "id": "cmpl-b",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 3, "total_tokens": len(text) // 4 + 3},
    }


class FakeBatchServer(ABC):
    """The HTTP skeleton both fakes share: routes to ``handle(method, path, headers, body)``."""

    def __init__(self, responder: Responder):
        self.responder = responder
        self.submissions: Counter[str] = Counter()
        self.behaviours: list[str] = []
        self.polls = 1
        self.held = threading.Event()  # set: no batch finishes (the client is killed meanwhile)
        self.batches: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def created(self) -> int:
        return len(self.batches)

    def _next_behaviour(self) -> str:
        return self.behaviours.pop(0) if self.behaviours else "complete"

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = fake.handle(method, self.path, dict(self.headers), body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", "application/octet-stream" if isinstance(payload, bytes) else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        return Handler

    @abstractmethod
    def handle(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict | bytes]:
        """The status and the JSON (or raw bytes) answering one request."""


class FakeOpenAIBatches(FakeBatchServer):
    def __init__(
        self, responder: Responder, runner: Callable[[Path, Path], None] | None = None, folder: Path | None = None
    ):
        super().__init__(responder)
        self.files: dict[str, bytes] = {}
        self.upload_faults: list[int] = []
        self.reverse = self.duplicate = False
        self.refuse: Callable[[dict], bool] = lambda line: False  # lines answered with an error
        self.garble: Callable[[dict], bool] = lambda line: False  # output lines cut short
        self.sync_calls = 0
        self.runner = runner
        self.folder = folder

    def handle(self, method, path, headers, body):
        path = path.split("?")[0]
        with self.lock:
            if method == "POST" and path == "/v1/files":
                if self.upload_faults:
                    return self.upload_faults.pop(0), {"error": {"message": "upload failed"}}
                message = BytesParser().parsebytes(f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode() + body)
                data = next(p.get_payload(decode=True) for p in message.get_payload() if p.get_filename())
                file_id = f"file-{next(self.ids)}"
                self.files[file_id] = data
                return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": 0,
                             "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}  # fmt: skip
            if method == "POST" and path == "/v1/chat/completions":  # a synchronous call (--batch-fallback sync)
                self.sync_calls += 1
                request = json.loads(body)
                return 200, chat_completion(request, self.responder(request))
            if method == "GET" and path.startswith("/v1/files/") and path.endswith("/content"):
                file_id = path.split("/")[3]
                return (200, self.files[file_id]) if file_id in self.files else (404, {"error": {"message": "no file"}})
            if method == "POST" and path == "/v1/batches":
                request = json.loads(body)
                lines = [json.loads(raw) for raw in self.files[request["input_file_id"]].decode().splitlines() if raw]
                for line in lines:
                    self.submissions[line["custom_id"]] += 1
                batch_id = f"batch_{next(self.ids)}"
                self.batches[batch_id] = {
                    "id": batch_id, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                    "input_file_id": request["input_file_id"], "completion_window": request["completion_window"],
                    "status": "in_progress", "output_file_id": None, "error_file_id": None,
                    "created_at": int(time.time()), "metadata": request.get("metadata"),
                    "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                    "_lines": lines, "_behaviour": self._next_behaviour(), "_polls": 0,
                }  # fmt: skip
                return 200, self._shown(self.batches[batch_id])
            if method == "GET" and path == "/v1/batches":
                shown = [
                    self._shown(b) for b in sorted(self.batches.values(), key=lambda b: -int(b["id"].split("_")[1]))
                ]
                return 200, {"object": "list", "data": shown, "has_more": False}
            if method == "GET" and path.startswith("/v1/batches/"):
                batch = self.batches.get(path.split("/")[3])
                if batch is None:
                    return 404, {"error": {"message": "No batch found with that id", "type": "invalid_request_error"}}
                batch["_polls"] += 1
                if batch["status"] == "in_progress" and batch["_polls"] > self.polls and not self.held.is_set():
                    self._finish(batch)
                return 200, self._shown(batch)
        return 404, {"error": {"message": f"no route {method} {path}"}}

    def _shown(self, batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _finish(self, batch: dict) -> None:
        lines, behaviour = batch["_lines"], batch["_behaviour"]
        if behaviour == "fail":
            batch.update(
                status="failed",
                errors={"object": "list", "data": [{"code": "server_error", "message": "the batch failed"}]},
            )
            return
        answered = lines[: len(lines) // 2] if behaviour == "expire" else lines
        outputs = self._answers(batch, answered)
        good = [o for o in outputs if o["error"] is None and o["response"]["status_code"] == 200]
        bad = [o for o in outputs if o not in good]
        if self.reverse:
            good.reverse()
        if self.duplicate and good:
            good.append(good[0])
        for name, rows in (("output_file_id", good), ("error_file_id", bad)):
            if rows:
                file_id = f"file-{next(self.ids)}"
                self.files[file_id] = "".join(self._written(r, lines) + "\n" for r in rows).encode()
                batch[name] = file_id
        batch["status"] = "expired" if behaviour == "expire" else "completed"
        batch["request_counts"] = {"total": len(lines), "completed": len(good), "failed": len(bad)}

    def _written(self, output: dict, lines: list[dict]) -> str:
        text = json.dumps(output)
        asked = next(line for line in lines if line["custom_id"] == output["custom_id"])
        return text[: len(text) // 3] if self.garble(asked) else text

    def _answers(self, batch: dict, lines: list[dict]) -> list[dict]:
        if self.runner is not None:  # a real engine answers the file
            assert self.folder is not None
            source, target = self.folder / f"{batch['id']}-in.jsonl", self.folder / f"{batch['id']}-out.jsonl"
            source.write_text("".join(json.dumps(line) + "\n" for line in lines))
            self.runner(source, target)
            return [json.loads(raw) for raw in target.read_text().splitlines() if raw.strip()]
        outputs = []
        for line in lines:
            if self.refuse(line):
                refused = {
                    "status_code": 400,
                    "request_id": "q",
                    "body": {"error": {"message": "the request was refused"}},
                }
                outputs.append({"id": "r", "custom_id": line["custom_id"], "error": None, "response": refused})
                continue
            response = {
                "status_code": 200,
                "request_id": "q",
                "body": chat_completion(line["body"], self.responder(line["body"])),
            }
            outputs.append({"id": "r", "custom_id": line["custom_id"], "error": None, "response": response})
        return outputs


class FakeAnthropicBatches(FakeBatchServer):
    """POST/GET /v1/messages/batches, GET .../results: answers from the responder, which reads the
    request as an OpenAI chat body (the system text first, an image as an image_url part)."""

    def handle(self, method, path, headers, body):
        path = path.split("?")[0]
        with self.lock:
            if method == "POST" and path == "/v1/messages/batches":
                requests = json.loads(body)["requests"]
                for request in requests:
                    self.submissions[request["custom_id"]] += 1
                batch_id = f"msgbatch_{next(self.ids)}"
                self.batches[batch_id] = {"_requests": requests, "_behaviour": self._next_behaviour(), "_polls": 0,
                                          "_ended": False, "id": batch_id}  # fmt: skip
                return 200, self._shown(self.batches[batch_id])
            parts = path.split("/")
            if method == "GET" and len(parts) >= 5 and parts[3] == "batches":
                batch = self.batches.get(parts[4])
                if batch is None:
                    return 404, {"type": "error", "error": {"type": "not_found_error", "message": "batch not found"}}
                if len(parts) == 6 and parts[5] == "results":
                    return 200, "".join(json.dumps(r) + "\n" for r in self._results(batch)).encode()
                batch["_polls"] += 1
                if not batch["_ended"] and batch["_polls"] > self.polls and not self.held.is_set():
                    batch["_ended"] = True
                return 200, self._shown(batch)
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {path}"}}

    def _results(self, batch: dict) -> list[dict]:
        requests, behaviour = batch["_requests"], batch["_behaviour"]
        out = []
        for number, request in enumerate(requests):
            if behaviour == "expire" and number >= len(requests) // 2:
                out.append({"custom_id": request["custom_id"], "result": {"type": "expired"}})
                continue
            params = request["params"]
            messages = [{"role": "system", "content": params["system"]}] if params.get("system") else []
            content = [
                {"type": "image_url", "image_url": {"url": "data:"}} if part["type"] == "image" else part
                for part in params["messages"][0]["content"]
            ]
            messages.append({"role": "user", "content": content})
            text = self.responder({"model": params["model"], "messages": messages})
            message = {"id": "msg", "type": "message", "role": "assistant", "model": params["model"],
                       "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": len(json.dumps(messages)) // 4, "output_tokens": 3}}  # fmt: skip
            out.append({"custom_id": request["custom_id"], "result": {"type": "succeeded", "message": message}})
        out.reverse()  # results come in any order
        return out

    def _shown(self, batch: dict) -> dict:
        requests = batch["_requests"]
        ended = batch["_ended"]
        expired = len(requests) - len(requests) // 2 if ended and batch["_behaviour"] == "expire" else 0
        return {
            "id": batch["id"], "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "request_counts": {"processing": 0 if ended else len(requests), "succeeded": len(requests) - expired if ended else 0,
                               "errored": 0, "canceled": 0, "expired": expired},
            "created_at": "2026-12-07T00:00:00Z", "expires_at": "2026-12-08T00:00:00Z",
            "ended_at": "2026-12-07T00:01:00Z" if ended else None, "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"{self.root}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }  # fmt: skip
