"""Schemas of step data: a pydantic model class, or any type pydantic can validate."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, TypeAdapter, ValidationError

from procflow.errors import StepValidationError, WorkflowDefinitionError

__all__ = ["Schema", "describe_validation_error"]


class Schema:
    """A compiled schema: validates values, skipping already-valid model instances.

    A value that is already an instance of the schema's model is accepted as is:
    pydantic validated it when it was built, and re-validating unchanged data
    would cost the hot path for nothing.
    """

    __slots__ = ("_adapter", "model", "type")

    def __init__(self, schema: Any, *, owner: str) -> None:
        self.type: Final = schema
        self.model: type[BaseModel] | None = (
            schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None)
        self._adapter: TypeAdapter[Any] | None = None
        if self.model is None:
            try:
                self._adapter = TypeAdapter(schema)
            except Exception as exc:  # pydantic raises several kinds here
                raise WorkflowDefinitionError(
                    f"{owner}: {schema!r} is not a usable schema; pass a pydantic model "
                    f"class or a type pydantic can validate ({exc})") from exc

    @property
    def name(self) -> str:
        """A short readable name of the schema."""
        return getattr(self.type, "__name__", repr(self.type))

    def validate(self, value: Any) -> Any:
        """Return ``value`` validated (a model instance for model schemas).

        Raises:
            pydantic.ValidationError: The value does not fit.
        """
        model = self.model
        if model is not None:
            if type(value) is model or isinstance(value, model):
                return value
            if isinstance(value, BaseModel):
                value = value.model_dump()
            return model.model_validate(value)
        assert self._adapter is not None  # set whenever model is None
        return self._adapter.validate_python(value)

    def check(self, value: Any, *, what: str, workflow_id: str | None, step_id: str | None,
              run_id: str | None = None) -> Any:
        """Validate ``value``, turning a pydantic failure into a ``StepValidationError``.

        Args:
            value: The data to validate.
            what: What the data is, for the message ("input", "output", "resume data").
            workflow_id: The workflow, for the message.
            step_id: The step, for the message (``None`` for the workflow's own data).
            run_id: The run, when known.
        """
        try:
            return self.validate(value)
        except ValidationError as exc:
            field, detail = describe_validation_error(exc)
            where = f"step '{step_id}'" if step_id else "the workflow"
            raise StepValidationError(
                f"workflow '{workflow_id}', {where}: {what} does not match schema "
                f"{self.name} at field '{field}': {detail}",
                workflow_id=workflow_id, run_id=run_id, step_id=step_id, field=field,
                errors=exc.errors(include_url=False)) from None

    def required_fields(self) -> set[str] | None:
        """Names of the required fields of a model schema; ``None`` for other schemas."""
        if self.model is None:
            return None
        return {name for name, info in self.model.model_fields.items() if info.is_required()}

    def fields(self) -> set[str] | None:
        """Names of all fields of a model schema; ``None`` for other schemas."""
        if self.model is None:
            return None
        return set(self.model.model_fields)


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The dotted location and a one-line description of the first error."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or "<root>"
    got = first.get("input")
    detail = f"{first.get('msg', 'invalid')} (got {_short(got)})"
    extra = exc.error_count() - 1
    if extra:
        detail += f"; and {extra} more error{'s' if extra > 1 else ''}"
    return field, detail


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
