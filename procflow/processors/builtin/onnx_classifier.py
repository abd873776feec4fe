"""``OnnxTextClassifier``: a text classifier exported to ONNX, run with onnxruntime and a
Hugging Face ``tokenizers`` tokenizer from files on disk (``procflow[onnx]``).

Nothing is ever downloaded: both paths must exist. Long texts are cut into windows of
``max_length`` tokens overlapping by ``stride`` tokens, run in batches, and the text's
score is the highest window score. One instance can be called from many threads at
once (onnxruntime sessions and tokenizers are thread-safe; no state changes per call).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from procflow._extras import require

__all__ = ["OnnxTextClassifier"]

_FEATURE = "OnnxTextClassifier"


class OnnxTextClassifier:
    """A ``text -> score`` classifier over a local ONNX model (for the ``classifier=``
    option of ``PromptInjectionDetector`` and ``ModerationProcessor``).

    Example::

        clf = OnnxTextClassifier("models/pi/model.onnx", "models/pi/tokenizer.json",
                                 label="INJECTION", threshold=0.8)
        guard = PromptInjectionDetector(classifier=clf)

    Args:
        model_path: The ``.onnx`` file (inputs ``input_ids``, ``attention_mask`` and
            optionally ``token_type_ids``; output logits ``[batch, labels]``).
        tokenizer_path: The ``tokenizer.json`` saved with the model.
        label: Which output is the score: an index, or a label name looked up in the
            ``config.json`` (``id2label``) beside the model.
        threshold: Flag at or above this score (used by the detectors).
        max_length: Tokens per window (the model's limit, e.g. 512).
        stride: Tokens shared by consecutive windows.
        batch_size: Windows per model call.
        name: Shown in evidence (default: the model file's parent folder and name).
        providers: onnxruntime execution providers (default CPU).

    Raises:
        ImportError: onnxruntime, numpy or tokenizers is not installed.
        FileNotFoundError: A path does not exist (nothing is downloaded, ever).
        ValueError: A bad option, or a label name the config does not list.
    """

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *,
                 label: int | str = 1, threshold: float = 0.5, max_length: int = 512,
                 stride: int = 64, batch_size: int = 8, name: str | None = None,
                 providers: list[str] | None = None) -> None:
        numpy = require("numpy", extra="onnx", feature=_FEATURE)
        onnxruntime = require("onnxruntime", extra="onnx", feature=_FEATURE)
        tokenizer_type = require("tokenizers", extra="onnx", feature=_FEATURE).Tokenizer
        model, tok = Path(model_path), Path(tokenizer_path)
        for what, path in (("model_path", model), ("tokenizer_path", tok)):
            if not path.is_file():
                raise FileNotFoundError(f"OnnxTextClassifier: {what} {str(path)!r} is not a "
                                        "file (models are never downloaded; export one and "
                                        "give its path)")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
                or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"OnnxTextClassifier: threshold must be in 0..1, got {threshold!r}")
        for option, value, low in (("max_length", max_length, 8), ("batch_size", batch_size, 1),
                                   ("stride", stride, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"OnnxTextClassifier: {option} must be an int >= {low}, "
                                 f"got {value!r}")
        if stride >= max_length - 2:
            raise ValueError(f"OnnxTextClassifier: stride ({stride}) must be smaller than "
                             f"max_length - 2 ({max_length - 2})")
        self._np: Any = numpy
        self._session: Any = onnxruntime.InferenceSession(
            str(model), providers=providers or ["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids"} - self._inputs
        if missing:
            raise ValueError(f"OnnxTextClassifier: model {str(model)!r} has no input "
                             f"'input_ids' (inputs: {sorted(self._inputs)})")
        self._tokenizer: Any = tokenizer_type.from_file(str(tok))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length, stride=stride)
        self.label = self._label_index(model, label)
        self.threshold = float(threshold)
        self.max_length, self.stride, self.batch_size = max_length, stride, batch_size
        self.name = name or f"onnx:{model.parent.name}/{model.name}"
        pad = self._tokenizer.token_to_id("[PAD]")
        self._pad = pad if pad is not None else 0

    @staticmethod
    def _label_index(model: Path, label: int | str) -> int:
        if isinstance(label, int) and not isinstance(label, bool) and label >= 0:
            return label
        if not isinstance(label, str):
            raise ValueError(f"OnnxTextClassifier: label must be an index or a name, "
                             f"got {label!r}")
        config = model.parent / "config.json"
        try:
            id2label = json.loads(config.read_text(encoding="utf-8"))["id2label"]
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"OnnxTextClassifier: label {label!r} is a name, but "
                             f"{str(config)!r} has no readable id2label ({exc}); give the "
                             "label's index instead") from None
        for index, name in id2label.items():
            if str(name).lower() == label.lower():
                return int(index)
        raise ValueError(f"OnnxTextClassifier: label {label!r} is not one of "
                         f"{sorted(map(str, id2label.values()))} in {str(config)!r}")

    def _windows(self, text: str) -> list[list[int]]:
        """Token ids per window, special tokens included (the tokenizer's truncation
        with a stride yields the overflowing windows)."""
        encoding = self._tokenizer.encode(text)
        return [list(encoding.ids), *(list(o.ids) for o in encoding.overflowing)]

    def _scores(self, windows: list[list[int]]) -> list[float]:
        np = self._np
        width = max(len(w) for w in windows)
        ids = np.full((len(windows), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for row, window in enumerate(windows):
            ids[row, :len(window)] = window
            mask[row, :len(window)] = 1
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float64)
        if logits.ndim == 1:
            logits = logits[:, None]
        out: list[float] = []
        for row in logits:
            if row.shape[0] == 1:
                out.append(1.0 / (1.0 + math.exp(-float(row[0]))))
                continue
            if self.label >= row.shape[0]:
                raise ValueError(f"OnnxTextClassifier: label index {self.label} is out of "
                                 f"range for a model with {row.shape[0]} outputs")
            shifted = np.exp(row - row.max())
            out.append(float(shifted[self.label] / shifted.sum()))
        return out

    def __call__(self, text: str) -> float:
        """The score of ``text`` (0..1): the highest over its windows."""
        windows = self._windows(text)
        best = 0.0
        for i in range(0, len(windows), self.batch_size):
            best = max(best, *self._scores(windows[i:i + self.batch_size]))
        return best

    def __repr__(self) -> str:
        return f"OnnxTextClassifier({self.name!r}, label={self.label}, threshold={self.threshold})"
