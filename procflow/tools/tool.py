"""Tools a model may call: ``Tool(...)``, the ``@tool`` decorator and ``ToolContext``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from procflow.context import RequestContext
from procflow.messages import Chunk
from procflow.models.base import ToolSpec
from procflow.runtime.tracing import ParentSpan
from procflow.steps.schema import describe_validation_error

__all__ = ["ChunkWriter", "Tool", "ToolContext", "ToolInputError", "ToolSuspended", "tool"]


class ToolInputError(ValueError):
    """The model called a tool with arguments that do not fit its input schema."""


class ToolSuspended(Exception):
    """Raised by ``ToolContext.suspend``: the agent run suspends at this tool call."""

    def __init__(self, payload: Any) -> None:
        super().__init__("tool suspended")
        self.payload = payload


class ChunkWriter(Protocol):
    """Sends custom "data-*" chunks to the caller's stream (the agent passes its
    ``ProcessorWriter``)."""

    async def custom(self, chunk: Chunk | Mapping[str, Any] | str, data: Any = None) -> None:
        """Emit a custom chunk: a ``Chunk``, a ``{"type", "data"}`` mapping, or a type."""


@dataclass(slots=True)
class ToolContext:
    """What a tool may use besides its arguments.

    Attributes:
        tool_call_id: The id of this call.
        request_context: The request's context.
        writer: Sends custom "data-*" chunks to the caller's stream.
        resume_data: What ``agent.resume(..., resume_data=...)`` handed back after this
            tool suspended, else ``None``.
        suspend_payload: What this call passed to ``suspend()`` before the resume that
            runs it again, else ``None``.
        run_id: The agent run calling the tool (``None`` outside an agent's loop).
        parent_span: The tool call's span, where a run the tool starts records its
            spans (``Workflow.create_run(parent_span=...)``), else ``None``.
        add_usage: Adds tokens the tool spent (a model call of its own) to the calling
            run's usage; ``None`` outside an agent's loop.
    """

    tool_call_id: str
    request_context: RequestContext
    writer: ChunkWriter
    resume_data: Any = None
    suspend_payload: Any = None
    run_id: str | None = None
    parent_span: ParentSpan | None = None
    add_usage: Callable[[Mapping[str, Any]], None] | None = None

    def suspend(self, payload: Any = None) -> NoReturn:
        """Suspend the agent run at this call; ``agent.resume(run_id, resume_data=...)``
        runs the tool again with ``ctx.resume_data`` set.

        Raises:
            ToolSuspended: Always (the agent loop catches it).
        """
        raise ToolSuspended(payload)


class Tool:
    """A tool: a name, a description, an input schema and an ``execute`` function.

    Args:
        id: The tool's name as the model sees it.
        description: What it does (the model reads this to decide when to call it).
        input_schema: A pydantic model of its arguments, or a JSON schema (a mapping)
            for a tool whose arguments are checked elsewhere (an MCP server's): then
            ``input`` is the arguments' dict.
        execute: ``execute(input)`` or ``execute(input, ctx: ToolContext)``, sync or
            async, where ``input`` is an ``input_schema`` instance.
        output_schema: Optional pydantic model the result is validated against.
        to_model_output: Optional function turning the result into what the model sees.
        requires_approval: The agent run suspends before each call of this tool until
            ``agent.resume(run_id, approve=[...] or deny=[...])`` decides it.
        attributes: Recorded on the trace span of each call (``{"mcp.server": ...}``).
    """

    def __init__(self, id: str, description: str,
                 input_schema: type[BaseModel] | Mapping[str, Any],
                 execute: Callable[..., Any], *, output_schema: type[BaseModel] | None = None,
                 to_model_output: Callable[[Any], Any] | None = None,
                 requires_approval: bool = False,
                 attributes: Mapping[str, Any] | None = None) -> None:
        if not isinstance(id, str) or not id.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"tool id must be letters, digits, '_' or '-', got {id!r}")
        if not (isinstance(input_schema, Mapping) or (
                isinstance(input_schema, type) and issubclass(input_schema, BaseModel))):
            raise ValueError(f"tool '{id}': input_schema must be a pydantic model class "
                             "or a JSON schema mapping")
        if not callable(execute):
            raise ValueError(f"tool '{id}': execute must be callable")
        self.id = id
        self.description = description or ""
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.to_model_output = to_model_output
        self.requires_approval = bool(requires_approval)
        self.attributes: dict[str, Any] = dict(attributes or {})
        self._execute = execute
        self._wants_ctx = len(inspect.signature(execute).parameters) >= 2
        self._spec: ToolSpec | None = None

    @property
    def name(self) -> str:
        return self.id

    def spec(self) -> ToolSpec:
        """The tool as the model sees it (name, description, JSON schema)."""
        if self._spec is None:
            schema = (dict(self.input_schema) if isinstance(self.input_schema, Mapping)
                      else self.input_schema.model_json_schema())
            self._spec = ToolSpec(self.id, self.description, schema)
        return self._spec

    def parse(self, args: Any) -> Any:
        """Validate the model's arguments (a JSON-schema tool takes any object).

        Raises:
            ToolInputError: Naming the field that does not fit.
        """
        if isinstance(self.input_schema, Mapping):
            if args is not None and not isinstance(args, Mapping):
                raise ToolInputError(f"invalid arguments for tool '{self.id}': expected an "
                                     f"object, got {type(args).__name__}")
            return dict(args or {})
        try:
            return self.input_schema.model_validate(args if args is not None else {})
        except ValidationError as exc:
            field, detail = describe_validation_error(exc)
            raise ToolInputError(f"invalid arguments for tool '{self.id}' at '{field}': "
                                 f"{detail}") from None

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        """Validate ``args``, run the tool, validate its result."""
        parsed = self.parse(args)
        out = self._execute(parsed, ctx) if self._wants_ctx else self._execute(parsed)
        if inspect.isawaitable(out):
            out = await out
        if self.output_schema is not None:
            out = self.output_schema.model_validate(out)
        return out

    def __repr__(self) -> str:
        return f"Tool(id={self.id!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         requires_approval: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None, requires_approval: bool = False,
         ) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a typed function: its name, its docstring as description,
    its parameters as the input schema. A parameter annotated ``ToolContext`` receives
    the call's context instead of a model argument. ``requires_approval=True``: the
    agent run suspends before each call until a person approves or denies it.

    Example::

        @tool
        async def lookup_order(order_id: str) -> dict:
            \"\"\"Look up an order by id.\"\"\"
            ...
    """

    def make(func: Callable[..., Any]) -> Tool:
        hints = get_type_hints(func)
        fields: dict[str, Any] = {}
        ctx_param: str | None = None
        for pname, param in inspect.signature(func).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                ctx_param = pname
                continue
            default = param.default if param.default is not inspect.Parameter.empty else ...
            fields[pname] = (annotation, default)
        model = create_model(f"{func.__name__}_input",
                             __config__=ConfigDict(extra="forbid"), **fields)
        is_async = inspect.iscoroutinefunction(func)

        async def execute(parsed: BaseModel, ctx: ToolContext) -> Any:
            kwargs = {k: getattr(parsed, k) for k in fields}
            if ctx_param is not None:
                kwargs[ctx_param] = ctx
            out = func(**kwargs)
            return await out if is_async else out

        return Tool(name or func.__name__, description or inspect.getdoc(func) or "",
                    model, execute, requires_approval=requires_approval)

    return make(fn) if fn is not None else make
