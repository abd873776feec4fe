"""Refuse before writing: values the run's storage cannot keep are refused before
anything changes (issue 42).

A resume's data is checked before the run is claimed: a refused resume leaves the run
suspended, waiting at the same step, resumable with other data. Text UTF-8 cannot
encode (a lone surrogate, e.g. ``"ok \\udcff"`` from ``surrogateescape``) is refused like
any other unstorable value, naming the step and the path inside the value; it is not
stored in an escaped form, which would read back as a different string.
"""

from __future__ import annotations

from typing import Any

from procflow.errors import StepValidationError
from procflow.storage.values import UnstorableValueError, encode_value

__all__ = ["refuse_unstorable"]


def refuse_unstorable(value: Any, *, storage: Any, root: str, workflow_id: str, run_id: str,
                      step_id: str | None) -> None:
    """Raise if ``storage`` could not keep ``value`` (nothing is written either way).

    A storage that keeps nothing (``persistent = False``) or keeps the objects
    themselves (``keeps_objects = True``) takes any value.

    Args:
        value: The value (resume data, a run's input).
        storage: The run's storage.
        root: What the value is, the start of the path in the message (``"resume_data"``).
        workflow_id: The run's workflow.
        run_id: The run.
        step_id: The step the value is for, if any.

    Raises:
        StepValidationError: The value, or something inside it, cannot be stored; its
            ``field`` is the path (``"resume_data.items[2]"``).
    """
    if not getattr(storage, "persistent", True) or getattr(storage, "keeps_objects", False):
        return
    try:
        encode_value(value)
    except UnstorableValueError as exc:
        where = exc.where(root)
        place = f"step '{step_id}'" if step_id is not None else "the run"
        raise StepValidationError(
            f"workflow '{workflow_id}', {place}: {where} is a {exc.type_name}, which the "
            f"run's storage ({type(storage).__name__}) cannot keep: {exc.reason}. Nothing "
            "was written.", workflow_id=workflow_id, run_id=run_id, step_id=step_id,
            field=where) from None
