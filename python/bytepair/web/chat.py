"""Chat formats: how a conversation becomes one text for the tokenizer.

cl100k_base and o200k_base get ChatML as Tiktokenizer shows it for GPT-4 and GPT-4o::

    <|im_start|>system<|im_sep|>You are helpful.<|im_end|><|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>

with ``<|im_start|>``, ``<|im_end|>``, ``<|im_sep|>`` added as special tokens (100264,
100265, 100266 on cl100k_base; 200264, 200265, 200266 on o200k_base).

Any other format is a JSON file (``bytepair serve --chat-template FILE``)::

    {
      "message": "<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>",
      "prefix": "<|begin_of_text|>",
      "separator": "",
      "suffix": "<|start_header_id|>assistant<|end_header_id|>\\n\\n",
      "special_tokens": {"<|begin_of_text|>": 128000, "<|eot_id|>": 128009}
    }

``message`` (required) is written once per message with ``{role}`` and ``{content}``
replaced (nothing else in it is special: other braces stay as they are); ``prefix``
comes first, ``separator`` between messages, ``suffix`` after the last one (usually the
assistant's turn opening). ``special_tokens`` (a ``{token: id}`` object, or a list
of tokens that take the next free ids) are added to the tokenizer. All but
``message`` are optional.

>>> CHATML_SEP.render([{"role": "user", "content": "Hi"}])
'<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

KEYS = ("message", "prefix", "separator", "suffix", "special_tokens")


@dataclass(frozen=True)
class ChatFormat:
    message: str
    prefix: str = ""
    separator: str = ""
    suffix: str = ""
    special_tokens: dict[str, int] | list[str] = field(default_factory=dict)

    def render(self, messages: list[dict]) -> str:
        """The conversation as one text: ``[{"role": ..., "content": ...}, ...]``."""
        parts = [
            self.message.replace("{role}", m["role"]).replace("{content}", m["content"])
            for m in messages
        ]
        return self.prefix + self.separator.join(parts) + self.suffix


def _chatml_sep(first_id: int) -> ChatFormat:
    return ChatFormat(
        message="<|im_start|>{role}<|im_sep|>{content}<|im_end|>",
        suffix="<|im_start|>assistant<|im_sep|>",
        special_tokens={
            "<|im_start|>": first_id,
            "<|im_end|>": first_id + 1,
            "<|im_sep|>": first_id + 2,
        },
    )


CHATML_SEP = _chatml_sep(100264)
#: The chat formats of the bundled encodings that have one.
BUILTIN: dict[str, ChatFormat] = {
    "cl100k_base": CHATML_SEP,
    "o200k_base": _chatml_sep(200264),
}


def read_template(path: str | Path) -> ChatFormat:
    """A chat format from a JSON template file (see the module docstring)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"--chat-template {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f'{path}: a chat template is a JSON object with a "message" key')
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r}; keys are {', '.join(KEYS)}")
    message = data.get("message")
    if not isinstance(message, str) or "{content}" not in message:
        raise ValueError(f'{path}: "message" must be a string containing {{content}}')
    for key in ("prefix", "separator", "suffix"):
        if not isinstance(data.get(key, ""), str):
            raise ValueError(f"{path}: {key!r} must be a string")
    specials = data.get("special_tokens", {})
    valid = (
        isinstance(specials, dict)
        and all(isinstance(t, str) and isinstance(i, int) for t, i in specials.items())
    ) or (isinstance(specials, list) and all(isinstance(t, str) for t in specials))
    if not valid:
        raise ValueError(
            f'{path}: "special_tokens" must be an object {{"<|token|>": id}} or a list of tokens'
        )
    return ChatFormat(
        message=message,
        prefix=data.get("prefix", ""),
        separator=data.get("separator", ""),
        suffix=data.get("suffix", ""),
        special_tokens=specials,
    )
