"""What a step sees while it runs: ``StepContext``, and the signals it can raise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, NoReturn

from procflow.errors import TripwireError
from procflow.records import Usage
from procflow.runtime.execution import Deferred, InputT

if TYPE_CHECKING:
    from procflow.context import RequestContext
    from procflow.records import Span
    from procflow.runtime.execution import Execution, Scope
    from procflow.runtime.tracing import Tracer

__all__ = ["BailSignal", "StepContext", "SuspendSignal"]


class SuspendSignal(BaseException):
    """Raised by ``ctx.suspend()``; the runtime ends the step as "suspended".

    A ``BaseException`` so that a step's own ``except Exception`` does not swallow it.
    """

    def __init__(self, payload: Any) -> None:
        super().__init__("step suspended")
        self.payload = payload


class BailSignal(BaseException):
    """Raised by ``ctx.bail()``; the runtime ends the run successfully with ``result``."""

    def __init__(self, result: Any) -> None:
        super().__init__("run bailed")
        self.result = result


class StepContext(Generic[InputT]):
    """The context a step's ``execute`` receives; ``StepContext[In]`` for a step whose
    input schema is ``In``.

    Attributes:
        input_data: The step's input (an ``In`` instance when its input schema is ``In``).
        resume_data: The data the step is being resumed with, else ``None``.
        retry_count: 0 on the first attempt, then 1, 2, ...
        iteration_count: For loop conditions: how many iterations have run.
        step_id: The step's path (dotted inside nested workflows).
        span: The step's trace span, when the run is traced (steps may open child
            spans with ``ctx.tracer``).
    """

    __slots__ = ("_ex", "_scope", "input_data", "iteration_count", "resume_data",
                 "retry_count", "span", "step_id")

    def __init__(self, ex: Execution, scope: Scope, step_id: str, input_data: InputT,
                 resume_data: Any = None, retry_count: int = 0,
                 iteration_count: int = 0, span: Span | None = None) -> None:
        self._ex = ex
        self._scope = scope
        self.step_id = step_id
        self.input_data: InputT = input_data
        self.resume_data = resume_data
        self.retry_count = retry_count
        self.iteration_count = iteration_count
        self.span = span

    @property
    def tracer(self) -> Tracer | None:
        """The run's tracer (``None`` when the run is not traced)."""
        return self._ex.tracer

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._ex.run_id

    @property
    def workflow_id(self) -> str:
        """The id of the workflow the step belongs to (the inner one, when nested)."""
        return self._scope.workflow_id

    @property
    def request_context(self) -> RequestContext:
        """The request context given to ``start``."""
        return self._ex.request_context

    @property
    def state(self) -> dict[str, Any]:
        """The run's shared state (this branch's view of it inside ``parallel``)."""
        return self._scope.state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Replace the shared state.

        Inside ``parallel``, ``branch`` and ``foreach`` each branch or item changes its
        own copy; the changes are merged in declaration (or item) order afterwards.
        """
        if not isinstance(state, Mapping):
            raise TypeError(
                f"step '{self.step_id}': set_state() takes a mapping, got {type(state).__name__}")
        self._scope.state = dict(state)

    def get_init_data(self) -> Any:
        """The input the (innermost) workflow was started with."""
        data = self._scope.init_data
        return data.get() if type(data) is Deferred else data

    def get_step_result(self, step: Any) -> Any:
        """The output of an earlier, successful step of this workflow, else ``None``.

        Args:
            step: The step object or its id.
        """
        step_id = step if isinstance(step, str) else getattr(step, "id", None)
        if not isinstance(step_id, str):
            raise TypeError(f"get_step_result() takes a step or a step id, got {step!r}")
        record = self._ex.records.get(self._scope.prefix + step_id)
        if record is None or record.status != "success":
            return None
        return record.output

    @property
    def suspend_payload(self) -> Any:
        """When the step is being resumed: what it passed to ``ctx.suspend()`` before
        (say, the id of the call it is waiting on); else ``None``."""
        record = self._ex.records.get(self.step_id)
        return None if record is None else record.suspend_payload

    async def suspend(self, payload: Any = None) -> NoReturn:
        """End this step as suspended; the run returns "suspended" until resumed.

        When resumed, the step runs again with ``ctx.resume_data`` set.
        """
        raise SuspendSignal(payload)

    def bail(self, result: Any = None) -> NoReturn:
        """End the whole run successfully now, with ``result`` as its output."""
        raise BailSignal(result)

    def abort(self, reason: str, *, retry: bool = False,
              metadata: Mapping[str, Any] | None = None) -> NoReturn:
        """Stop the run with status "tripwire" and this reason.

        Raises:
            TripwireError: Always.
        """
        raise TripwireError(reason, retry=retry, metadata=metadata, processor_id=self.step_id)

    def add_usage(self, usage: Usage | Mapping[str, Any]) -> None:
        """Report tokens this step spent (a model call, an agent call): they add up in
        the run's ``WorkflowResult.usage`` and show on the step's trace span as
        ``usage``.

        Args:
            usage: A ``Usage`` or a mapping of counts (``input_tokens``, ...).

        Raises:
            ValueError: A count is not a non-negative whole number.
        """
        got = Usage.of(usage)
        self._ex.add_usage(got)
        span = self.span
        if span is not None:
            before = (span.attributes or {}).get("usage")
            span.set(usage=(got + Usage.of(before)).to_dict() if before else got.to_dict())

    async def emit(self, event_type: str, payload: Any = None) -> None:
        """Send a custom event to whoever streams the run (a no-op when nobody does).

        Args:
            event_type: A name for the event, e.g. "data-progress".
            payload: Any data.
        """
        await self._ex.emit_custom(self.step_id, event_type, payload)

    def __repr__(self) -> str:
        return f"StepContext(step_id={self.step_id!r}, run_id={self.run_id!r})"
