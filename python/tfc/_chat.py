"""Chat templates: a Hugging Face directory's Jinja template, rendered as
transformers' ``apply_chat_template`` renders it.

The template is ``chat_template`` in tokenizer_config.json (a string, or a list of
named templates of which "default" is taken), or the file chat_template.jinja that
transformers 4.43+ saves beside it. It is rendered with jinja2 (the library
transformers itself uses, so templates written for it behave the same) in an
immutable sandbox, with transformers' settings (``trim_blocks``, ``lstrip_blocks``,
the ``loopcontrols`` extension), its ``tojson`` filter, and its globals
``raise_exception`` and ``strftime_now``. The special tokens of
tokenizer_config.json (``bos_token``, ``eos_token``, ...) are template variables,
and the rendered text is tokenized without adding special tokens again, as
transformers does (the template writes them itself).
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._errors import InvalidArgument

#: The roles a message may have (OpenAI's, with "developer" as a system message).
ROLES = ("system", "developer", "user", "assistant", "tool")


def _token_text(value: Any) -> Optional[str]:
    """A special token of tokenizer_config.json: a string, or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def normalize_messages(messages: Any, where: str = "messages") -> List[Dict[str, Any]]:
    """Checks OpenAI-style chat messages and returns them with each content a string
    (a list of text parts is joined, as vLLM does for text-only models). Raises
    InvalidArgument naming the message and field."""
    if not isinstance(messages, list) or not messages:
        raise InvalidArgument(f"'{where}' must be a non-empty list of messages")
    out = []
    for i, m in enumerate(messages):
        at = f"{where}[{i}]"
        if not isinstance(m, dict):
            raise InvalidArgument(f"'{at}' must be an object with 'role' and 'content'")
        role = m.get("role")
        if role not in ROLES:
            raise InvalidArgument(f"'{at}.role' must be one of {', '.join(ROLES)}, got {role!r}")
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                if not isinstance(part, dict) or part.get("type") != "text" \
                        or not isinstance(part.get("text"), str):
                    raise InvalidArgument(f"'{at}.content[{j}]' must be a text part "
                                          f"({{\"type\": \"text\", \"text\": ...}}): "
                                          f"this model reads text only")
                texts.append(part["text"])
            content = "\n".join(texts)
        elif content is None and role == "assistant":
            content = ""
        elif not isinstance(content, str):
            raise InvalidArgument(f"'{at}.content' must be a string or a list of text parts")
        for key in m:
            if key not in ("role", "content", "name"):
                raise InvalidArgument(f"'{at}.{key}' is not supported (tfc's chat takes "
                                      f"role, content and name)")
        msg = {"role": "system" if role == "developer" else role, "content": content}
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        out.append(msg)
    return out


class ChatTemplate:
    """A compiled chat template and the special tokens it may use."""

    def __init__(self, source: str, special_tokens: Optional[Mapping[str, str]] = None) -> None:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                              separators=separators, sort_keys=sort_keys)

        def strftime_now(fmt):
            return datetime.now().strftime(fmt)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            raise InvalidArgument(f"the chat template does not parse: {e}") from None
        self.source = source
        self.special_tokens = dict(special_tokens or {})

    @classmethod
    def from_dir(cls, directory: Path) -> Optional["ChatTemplate"]:
        """The directory's chat template, or None when it has none."""
        directory = Path(directory)
        cfg: Dict[str, Any] = {}
        try:
            with open(directory / "tokenizer_config.json", encoding="utf-8") as f:
                cfg = json.load(f)
        except FileNotFoundError:
            pass
        source = cfg.get("chat_template")
        if isinstance(source, list):  # [{"name": ..., "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        jinja_file = directory / "chat_template.jinja"
        if not isinstance(source, str) and jinja_file.is_file():
            source = jinja_file.read_text(encoding="utf-8")
        if not isinstance(source, str):
            return None
        specials = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                    "cls_token", "mask_token"):
            text = _token_text(cfg.get(key))
            if text is not None:
                specials[key] = text
        return cls(source, specials)

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
               **variables: Any) -> str:
        """The prompt text for ``messages`` (checked by normalize_messages), ending with
        the assistant's turn when ``add_generation_prompt``. A template's own
        ``raise_exception`` (e.g. "roles must alternate") becomes InvalidArgument."""
        import jinja2

        msgs = normalize_messages(list(messages))
        try:
            return self._template.render(messages=msgs,
                                         add_generation_prompt=add_generation_prompt,
                                         **self.special_tokens, **variables)
        except jinja2.exceptions.TemplateError as e:
            raise InvalidArgument(f"the chat template refused these messages: {e}") from None
