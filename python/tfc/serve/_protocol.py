"""The OpenAI request bodies `tfc serve` reads, checked field by field.

Every problem is an APIError in OpenAI's error shape,
``{"error": {"message", "type", "param", "code"}}``, whose ``param`` names the
field. Unknown fields are refused, as OpenAI refuses them ("Unrecognized request
argument supplied"), so that a misspelt option never silently does nothing.
Fields that OpenAI defines but tfc cannot honour (penalties, logit_bias, tools,
top_logprobs above 0) are accepted only at their neutral value and refused
otherwise, naming the field.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union


class APIError(Exception):
    """An error response: HTTP ``status`` and OpenAI's error object."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: Optional[str] = None, code: Optional[str] = None,
                 headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> Dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def bad(param: str, message: str) -> APIError:
    return APIError(400, message, param=param)


#: The largest n: each choice is one engine request.
MAX_N = 16


@dataclass
class Sampling:
    """The generation options of a completion or chat request."""

    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    seed: Optional[int] = None
    n: int = 1
    stop: List[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    beam: Optional[int] = None
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    cache_salt: Optional[str] = None


@dataclass
class Completion:
    model: str
    prompts: List[Union[str, List[int]]]
    sampling: Sampling


@dataclass
class Chat:
    model: str
    messages: List[Dict[str, Any]]
    sampling: Sampling


@dataclass
class Embedding:
    model: str
    inputs: List[str]
    encoding_format: str = "float"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(float(v)))


def _check_keys(body: Dict[str, Any], allowed: set) -> None:
    for key in body:
        if key not in allowed:
            raise bad(key, f"Unrecognized request argument supplied: {key}")


def _model(body: Dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "'model' is required: a string naming the model (GET /v1/models)")
    return model


def _neutral(body: Dict[str, Any], key: str, neutral: Any, why: str) -> None:
    """A field tfc accepts only at OpenAI's default (or null)."""
    value = body.get(key)
    if value is None or value == neutral:
        return
    raise bad(key, f"'{key}' is not supported {why}; leave it out or set it to {neutral!r}")


_SAMPLING_KEYS = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop",
                  "stream", "stream_options", "logprobs", "user", "presence_penalty",
                  "frequency_penalty", "logit_bias", "beam", "repetition_penalty", "min_p",
                  "cache_salt"}


def _sampling(body: Dict[str, Any], chat: bool) -> Sampling:
    s = Sampling()
    max_key = "max_tokens"
    if chat and body.get("max_completion_tokens") is not None:
        max_key = "max_completion_tokens"
    v = body.get(max_key)
    if v is not None:
        if not _is_int(v) or v < 1:
            raise bad(max_key, f"'{max_key}' must be an integer of at least 1, got {v!r}")
        s.max_tokens = v
    v = body.get("temperature")
    if v is not None:
        if not _is_number(v) or not 0 <= v <= 2:
            raise bad("temperature", f"'temperature' must be a number from 0 to 2, got {v!r}")
        s.temperature = float(v)
    v = body.get("top_p")
    if v is not None:
        if not _is_number(v) or not 0 < v <= 1:
            raise bad("top_p", f"'top_p' must be a number in (0, 1], got {v!r}")
        s.top_p = float(v)
    v = body.get("top_k")
    if v is not None:
        if not _is_int(v) or v < -1:
            raise bad("top_k", f"'top_k' must be an integer, -1 or 0 for none, got {v!r}")
        s.top_k = max(v, 0)
    v = body.get("cache_salt")  # vLLM's: prefix-cache blocks shared within one salt only
    if v is not None:
        if not isinstance(v, str) or not v:
            raise bad("cache_salt", f"'cache_salt' must be a non-empty string, got {v!r}")
        s.cache_salt = v
    v = body.get("seed")
    if v is not None:
        if not _is_int(v):
            raise bad("seed", f"'seed' must be an integer, got {v!r}")
        s.seed = v & 0x7FFFFFFFFFFFFFFF
    v = body.get("n", 1)
    if v is not None:
        if not _is_int(v) or not 1 <= v <= MAX_N:
            raise bad("n", f"'n' must be an integer from 1 to {MAX_N}, got {v!r}")
        s.n = v
    v = body.get("stop")
    if isinstance(v, str):
        v = [v]
    if v is not None:
        if (not isinstance(v, list) or len(v) > 4
                or not all(isinstance(x, str) and x for x in v)):
            raise bad("stop", "'stop' must be a non-empty string or a list of at most 4 of them")
        s.stop = v
    v = body.get("stream", False)
    if not isinstance(v, bool) and v is not None:
        raise bad("stream", f"'stream' must be a boolean, got {v!r}")
    s.stream = bool(v)
    v = body.get("stream_options")
    if v is not None:
        if not isinstance(v, dict) or set(v) - {"include_usage"} or \
                not isinstance(v.get("include_usage", False), bool):
            raise bad("stream_options", "'stream_options' takes one field, include_usage "
                                        "(a boolean)")
        if not s.stream:
            raise bad("stream_options", "'stream_options' is only allowed with 'stream': true")
        s.include_usage = bool(v.get("include_usage", False))
    if chat:
        v = body.get("logprobs", False)
        if not isinstance(v, bool) and v is not None:
            raise bad("logprobs", f"'logprobs' must be a boolean, got {v!r}")
        s.logprobs = bool(v)
        _neutral(body, "top_logprobs", 0, "above 0: tfc returns the log-probability of each "
                                          "chosen token, not of the alternatives")
    else:
        v = body.get("logprobs")
        if v is not None and (not _is_int(v) or v != 0):
            raise bad("logprobs", "'logprobs' above 0 is not supported: tfc returns the "
                                  "log-probability of each chosen token (logprobs: 0), not of "
                                  "the alternatives")
        s.logprobs = v is not None
    for key in ("presence_penalty", "frequency_penalty"):
        _neutral(body, key, 0, "by tfc's engine")
    _neutral(body, "logit_bias", {}, "by tfc's engine")
    v = body.get("beam")
    if v is not None:
        if not _is_int(v) or not 1 <= v <= 16:
            raise bad("beam", f"'beam' must be an integer from 1 to 16, got {v!r}")
        s.beam = v
    v = body.get("repetition_penalty")
    if v is not None:
        if not _is_number(v) or not 0 < v <= 10:
            raise bad("repetition_penalty", f"'repetition_penalty' must be a number in (0, 10], "
                                            f"got {v!r}")
        s.repetition_penalty = float(v)
    v = body.get("min_p")
    if v is not None:
        if not _is_number(v) or not 0 <= v <= 1:
            raise bad("min_p", f"'min_p' must be a number from 0 to 1, got {v!r}")
        s.min_p = float(v)
    if s.beam and s.beam > 1 and s.repetition_penalty != 1.0:
        raise bad("repetition_penalty", "'repetition_penalty' cannot be combined with beam "
                                        "search ('beam' above 1)")
    if s.beam and s.beam > 1 and s.n > 1:
        raise bad("n", "'n' above 1 cannot be combined with beam search ('beam' above 1)")
    if user := body.get("user"):
        if not isinstance(user, str):
            raise bad("user", "'user' must be a string")
    return s


def parse_completion(body: Dict[str, Any]) -> Completion:
    _check_keys(body, _SAMPLING_KEYS | {"prompt", "echo", "best_of", "suffix"})
    model = _model(body)
    _neutral(body, "echo", False, "by tfc")
    _neutral(body, "best_of", 1, "by tfc")
    _neutral(body, "suffix", None, "by tfc")
    p = body.get("prompt")
    if isinstance(p, str) or (isinstance(p, list) and p and all(_is_int(t) for t in p)):
        prompts = [p]
    elif isinstance(p, list) and p and all(isinstance(x, str) for x in p):
        prompts = list(p)
    elif isinstance(p, list) and p and all(isinstance(x, list) and x and all(_is_int(t) for t in x)
                                           for x in p):
        prompts = list(p)
    else:
        raise bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids "
                            "or a list of lists of token ids")
    for i, x in enumerate(prompts):
        if isinstance(x, str) and not x:
            raise bad("prompt", f"prompt {i} is empty")
    return Completion(model, prompts, _sampling(body, chat=False))


def parse_chat(body: Dict[str, Any]) -> Chat:
    _check_keys(body, _SAMPLING_KEYS | {"messages", "max_completion_tokens", "top_logprobs",
                                        "tools", "tool_choice", "parallel_tool_calls",
                                        "response_format"})
    model = _model(body)
    if body.get("tools"):
        raise bad("tools", "'tools' is not supported by tfc's chat")
    _neutral(body, "tool_choice", "none", "by tfc's chat")
    rf = body.get("response_format")
    if rf is not None and rf != {"type": "text"}:
        raise bad("response_format", "'response_format' must be {\"type\": \"text\"}: tfc does "
                                     "not constrain its output")
    from .._chat import normalize_messages
    from .._errors import InvalidArgument

    try:
        messages = normalize_messages(body.get("messages"))
    except InvalidArgument as e:
        raise bad("messages", str(e)) from None
    return Chat(model, messages, _sampling(body, chat=True))


def parse_embedding(body: Dict[str, Any]) -> Embedding:
    _check_keys(body, {"model", "input", "encoding_format", "dimensions", "user"})
    model = _model(body)
    x = body.get("input")
    if isinstance(x, str):
        x = [x]
    if not isinstance(x, list) or not x or not all(isinstance(t, str) for t in x):
        raise bad("input", "'input' must be a string or a non-empty list of strings")
    for i, t in enumerate(x):
        if not t:
            raise bad("input", f"input {i} is empty")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise bad("encoding_format", f"'encoding_format' must be 'float' or 'base64', got {fmt!r}")
    return Embedding(model, x, fmt)
