"""A scripted local model server on loopback, as Ollama, llama.cpp, LM Studio,
vLLM or llama-cpp-python present themselves: an OpenAI-compatible chat
endpoint that needs no key, ``/v1/models``, and the endpoint each uses to
tell its context window (Ollama ``POST /api/show``, llama.cpp's
``llama-server`` ``GET /props``, vLLM ``max_model_len`` in ``/v1/models``;
LM Studio and llama-cpp-python tell none: the latter lists its models as
``owned_by: "me"`` and answers 404 at ``/props``)."""

from __future__ import annotations

import json

from testkit.http_base import Response, json_response
from testkit.llm_server import Handler, ScriptedLLM

KINDS = ("ollama", "llama.cpp", "lmstudio", "vllm", "llama-cpp-python")


class LocalModelServer(ScriptedLLM):
    def __init__(self, kind: str, model: str = "smollm2:135m", n_ctx: int = 8192, handler: Handler | None = None):
        assert kind in KINDS, kind
        super().__init__(handler, api_key="")
        self.kind, self.model, self.n_ctx = kind, model, n_ctx
        self.probes: list[str] = []  # the paths asked besides chat completions
        # Ollama: the model file's num_ctx (n_ctx), or none and only the trained length
        self.num_ctx_set, self.trained_ctx = True, 131072

    def _authorised(self, headers) -> bool:
        return True  # a local server takes any key, or none

    def _respond(self, path: str, headers, raw: bytes, method: str = "POST") -> Response:
        route = path.split("?")[0]
        if route == self.path:
            return super()._respond(path, headers, raw, method)
        with self._lock:
            self.probes.append(f"{method} {route}")
        if method == "GET" and route == "/v1/models":
            entry = {"id": self.model, "object": "model", "owned_by": self.kind}
            if self.kind == "llama-cpp-python":
                entry |= {"owned_by": "me", "permissions": []}
            if self.kind == "vllm":
                entry["max_model_len"] = self.n_ctx
            return json_response(200, {"object": "list", "data": [entry]})
        if self.kind == "llama.cpp" and method == "GET" and route == "/props":
            return json_response(200, {"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 1})
        if self.kind == "ollama" and method == "POST" and route == "/api/show":
            asked = json.loads(raw or b"{}").get("model")
            if asked != self.model:
                return json_response(404, {"error": f"model '{asked}' not found"})
            parameters = "stop <|im_end|>" + (f"\nnum_ctx {self.n_ctx}" if self.num_ctx_set else "")
            info = {"llama.context_length": self.trained_ctx}
            return json_response(200, {"parameters": parameters, "model_info": info})
        return json_response(404, {"error": f"no route {route}"})
