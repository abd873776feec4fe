"""``UnicodeNormalizer``: tidy the text of input messages before the model sees it."""

from __future__ import annotations

import re
import unicodedata

from procflow.messages import Message, Part, TextPart
from procflow.processors.args import ProcessInputArgs
from procflow.processors.base import Processor

__all__ = ["UnicodeNormalizer"]

# Pictographic code points, plus the marks that build emoji sequences (VS16, keycap,
# tags, ZWJ). Skin tones and regional indicators sit inside U+1F000..U+1FAFF.
_EMOJI_CLASS = ("\u231a\u231b\u2328\u23cf\u23e9-\u23f3\u23f8-\u23fa\u2600-\u27bf\u2934\u2935"
                "\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55\u3030\u303d\u3297\u3299"
                "\U0001f000-\U0001faff\ufe0f\u20e3\U000e0020-\U000e007f")
_EMOJI = re.compile(f"[{_EMOJI_CLASS}\u200d]+")
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
# A ZWJ between two emoji glues one emoji together (a family, a flag of a profession):
# with preserve_emojis it stays, every other zero-width character goes.
_ZERO_WIDTH_OUTSIDE_EMOJI = re.compile(
    f"[\u200b\u200c\u2060\ufeff]|(?<![{_EMOJI_CLASS}])\u200d|\u200d(?![{_EMOJI_CLASS}])")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile("[ \t]{2,}|\t")
_NEWLINES = re.compile("\n{3,}")


class UnicodeNormalizer(Processor):
    """Normalizes the text parts of input messages.

    Always: Unicode NFKC, CRLF and CR to LF, and zero-width characters (U+200B..U+200D,
    U+2060, U+FEFF) removed (a zero-width joiner inside an emoji sequence is kept
    while ``preserve_emojis`` is on, so 👨‍👩‍👧 stays one emoji).

    Args:
        strip_control_chars: Remove control characters (``\\n`` and ``\\t`` are kept).
        preserve_emojis: Keep emoji; ``False`` removes them.
        collapse_whitespace: Runs of spaces and tabs become one space; three or more
            newlines become two.
        trim: Strip whitespace at the start and end of each message's text.
    """

    id = "unicode-normalizer"

    def __init__(self, *, strip_control_chars: bool = False, preserve_emojis: bool = True,
                 collapse_whitespace: bool = True, trim: bool = True) -> None:
        self.strip_control_chars = bool(strip_control_chars)
        self.preserve_emojis = bool(preserve_emojis)
        self.collapse_whitespace = bool(collapse_whitespace)
        self.trim = bool(trim)

    def _clean(self, text: str) -> str:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        text = unicodedata.normalize("NFKC", text)
        if self.preserve_emojis:
            text = _ZERO_WIDTH_OUTSIDE_EMOJI.sub("", text)
        else:
            text = _EMOJI.sub("", _ZERO_WIDTH.sub("", text))
        if self.strip_control_chars:
            text = _CONTROL.sub("", text)
        if self.collapse_whitespace:
            text = _NEWLINES.sub("\n\n", _SPACES.sub(" ", text))
        return text

    def normalize(self, text: str) -> str:
        """``text`` normalized with this processor's settings (pure)."""
        text = self._clean(text)
        return text.strip() if self.trim else text

    def _message(self, msg: Message) -> Message:
        texts = [i for i, p in enumerate(msg.content.parts) if isinstance(p, TextPart)]
        parts: list[Part] = list(msg.content.parts)
        for i, part in enumerate(msg.content.parts):
            if not isinstance(part, TextPart):
                continue
            text = self._clean(part.text)
            if self.trim and i == texts[0]:
                text = text.lstrip()
            if self.trim and i == texts[-1]:
                text = text.rstrip()
            if text != part.text:
                parts[i] = TextPart(text=text)
        flat = msg.content.content
        new_flat = self.normalize(flat) if flat is not None else None
        if new_flat == flat and all(a is b for a, b in zip(parts, msg.content.parts, strict=True)):
            return msg
        content = msg.content.model_copy(update={"parts": parts, "content": new_flat})
        return msg.model_copy(update={"content": content})

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Normalize every input message's text; ``None`` when nothing changed."""
        out = [self._message(m) for m in args.messages]
        if all(a is b for a, b in zip(out, args.messages, strict=True)):
            return None
        return out
