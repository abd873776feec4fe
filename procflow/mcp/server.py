"""Workflows and agents as MCP tools: ``serve(...)`` and ``procflow mcp serve``.

A workflow is a tool of its id taking its ``input_schema`` (an object schema as is,
any other wrapped as ``{"input": ...}``) and answering its result as structured
content and JSON text. An agent is a tool of its id taking ``{"prompt": str}`` and
answering the agent's text. A run that suspends answers with its run id and what it
waits for; a run that fails or trips answers an error result naming the run.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import types as mt
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from procflow.agent.agent import Agent
from procflow.runtime.results import WorkflowResult
from procflow.storage.base import Storage
from procflow.storage.locate import get_default_storage, set_default_storage
from procflow.workflows.workflow import Workflow

__all__ = ["TOKEN_ENV", "build_server", "parse_address", "serve"]

TOKEN_ENV = "PROCFLOW_MCP_TOKEN"
"""The environment variable ``procflow mcp serve`` reads the bearer token from."""

_Handler = Callable[[dict[str, Any]], Awaitable[mt.CallToolResult]]


@dataclass(frozen=True, slots=True)
class _Exposed:
    tool: mt.Tool
    call: _Handler


def build_server(targets: Sequence[Workflow | Agent], *, storage: Storage | None = None,
                 name: str = "procflow") -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) with a tool per target.

    Args:
        targets: Committed workflows and agents.
        storage: Where workflow runs are stored (default: each workflow's own, else
            the default storage).
        name: The server's name in the MCP handshake.

    Raises:
        ValueError: No targets, two with the same tool name, or something else.
    """
    exposed: dict[str, _Exposed] = {}
    for target in targets:
        if isinstance(target, Workflow):
            item = _workflow_tool(target, storage)
        elif isinstance(target, Agent):
            item = _agent_tool(target)
        else:
            raise ValueError(f"serve() takes workflows and agents, got {type(target).__name__}")
        if item.tool.name in exposed:
            raise ValueError(f"two targets are named '{item.tool.name}'")
        exposed[item.tool.name] = item
    if not exposed:
        raise ValueError("serve() needs at least one workflow or agent")

    async def list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[e.tool for e in exposed.values()])

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        item = exposed.get(params.name)
        if item is None:
            return _error(f"unknown tool '{params.name}'; tools: {sorted(exposed)}")
        return await item.call(dict(params.arguments or {}))

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(*targets: Workflow | Agent, http: str | None = None,
                token: str | None = None, storage: Storage | None = None,
                name: str = "procflow", ready: Callable[[str], None] | None = None) -> None:
    """Serve workflows and agents as MCP tools until cancelled (or stdin closes).

    Args:
        *targets: Committed workflows and agents.
        http: ``"HOST:PORT"`` for streamable HTTP at ``http://HOST:PORT/mcp`` (``":PORT"``
            or ``"PORT"`` bind 127.0.0.1); ``None`` serves stdio.
        token: A bearer token every HTTP request must carry (``Authorization: Bearer
            ...``), else 401. Required to bind an address other than loopback.
        storage: Where runs are stored (agents: their traces too); default resolution
            otherwise.
        name: The server's name in the MCP handshake.
        ready: Called with the URL (or "stdio") once the server listens.

    Raises:
        ValueError: A non-loopback address without a token, or a bad target.

    Example::

        await serve(double, helper, http="127.0.0.1:8765")
    """
    server = build_server(targets, storage=storage, name=name)
    previous = get_default_storage()
    if storage is not None:
        set_default_storage(storage)  # agent runs store through the default, as in 'run'
    try:
        if http is None:
            async with stdio_server() as (read, write):
                if ready is not None:
                    ready("stdio")
                await server.run(read, write, server.create_initialization_options())
        else:
            await _serve_http(server, http, token, ready)
    finally:
        if storage is not None:
            set_default_storage(previous)


def parse_address(value: str) -> tuple[str, int]:
    """``"HOST:PORT"``, ``":PORT"`` or ``"PORT"`` → (host, port); host 127.0.0.1 unless given.

    Raises:
        ValueError: Not an address.
    """
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--http must be HOST:PORT, :PORT or PORT, got {value!r}")
    return host, int(port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _serve_http(server: Server[Any], address: str, token: str | None,
                      ready: Callable[[str], None] | None) -> None:
    import uvicorn

    host, port = parse_address(address)
    if not token and not _loopback(host):
        raise ValueError(f"serving MCP on {host} (not loopback) needs a bearer token: "
                         f"--token or {TOKEN_ENV}")
    app: Any = server.streamable_http_app(host=host)
    if token:
        app = _BearerAuth(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=5)
    userver = uvicorn.Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        # Shielded: uvicorn closes its sockets only on its own way out (should_exit).
        with anyio.CancelScope(shield=True):
            try:
                await userver.serve()  # returns on SIGINT/SIGTERM or should_exit
            except SystemExit:  # uvicorn's answer to a port it cannot bind
                pass
            finally:
                stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            while not userver.started:
                if stopped.is_set():
                    raise OSError(f"could not serve MCP on {host}:{port}")
                await anyio.sleep(0.05)
            bound = userver.servers[0].sockets[0].getsockname()[1]
            if ready is not None:
                ready(f"http://{host if ':' not in host else f'[{host}]'}:{bound}/mcp")
            await stopped.wait()
        finally:
            userver.should_exit = True


class _BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


# -- workflows ------------------------------------------------------------------------

def _workflow_tool(wf: Workflow, storage: Storage | None) -> _Exposed:
    schema = _json_schema(wf.input_schema)
    wrapped = schema.get("type") != "object"
    if wrapped:
        schema = {"type": "object", "properties": {"input": schema}, "required": ["input"]}
    tool = mt.Tool(name=_tool_name(wf.id), input_schema=schema,
                   description=wf.description or f"Run the procflow workflow '{wf.id}'.")

    async def call(args: dict[str, Any]) -> mt.CallToolResult:
        data = args.get("input") if wrapped else args
        run = wf.create_run(storage=storage)
        try:
            result = await run.start(input_data=data)
        except Exception as exc:  # bad input: StepValidationError, before the run
            return _error(f"workflow '{wf.id}': {exc}")
        return _workflow_answer(wf, result)

    return _Exposed(tool, call)


def _workflow_answer(wf: Workflow, result: WorkflowResult) -> mt.CallToolResult:
    run = f"workflow '{wf.id}' run {result.run_id}"
    if result.status == "success":
        value = _jsonable(result.result)
        return _answer(value if isinstance(value, dict) else {"result": value},
                       json.dumps(value, ensure_ascii=False))
    if result.status == "suspended":
        waiting = {path: _jsonable(result.steps[path].suspend_payload)
                   for path in result.suspended_at if path in result.steps}
        return _answer({"run_id": result.run_id, "status": "suspended",
                        "suspended_at": result.suspended_at, "waiting_for": waiting},
                       f"{run} suspended at {', '.join(result.suspended_at)}, waiting for "
                       f"{json.dumps(waiting, ensure_ascii=False)}; resume it with "
                       f"'procflow run ... --resume STEP --run {result.run_id}'")
    if result.status == "tripwire" and result.tripwire is not None:
        return _error(f"{run} was stopped by a processor: {result.tripwire.reason}")
    return _error(f"{run} {result.status}: {result.error}")


# -- agents ---------------------------------------------------------------------------

_PROMPT = {"type": "object", "properties": {"prompt": {
    "type": "string", "description": "What to ask the agent."}}, "required": ["prompt"]}


def _agent_tool(agent: Agent) -> _Exposed:
    tool = mt.Tool(name=_tool_name(agent.id), input_schema=_PROMPT,
                   description=agent.description or f"Ask the procflow agent '{agent.id}'.")

    async def call(args: dict[str, Any]) -> mt.CallToolResult:
        prompt = args.get("prompt")
        if not isinstance(prompt, str):
            return _error(f"agent '{agent.id}': 'prompt' must be a string")
        try:
            out = await agent.generate(prompt)
        except Exception as exc:
            return _error(f"agent '{agent.id}' failed: {type(exc).__name__}: {exc}")
        run = f"agent '{agent.id}' run {out.run_id}"
        if out.tripwire is not None:
            return _error(f"{run} was stopped by a processor: {out.tripwire.reason}")
        if out.suspended:
            calls = [{"tool_call_id": c.tool_call_id, "tool_name": c.tool_name,
                      "args": _jsonable(c.args), "payload": _jsonable(c.payload)}
                     for c in out.suspended]
            return _answer({"run_id": out.run_id, "status": "suspended", "suspended": calls},
                           f"{run} suspended, waiting for tool calls "
                           f"{[c['tool_name'] for c in calls]}; resume it with 'procflow run "
                           f"... --resume {out.run_id} --approve CALL_ID'")
        return _answer(None, out.text)

    return _Exposed(tool, call)


# -- helpers --------------------------------------------------------------------------

def _answer(structured: dict[str, Any] | None, text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)],
                             structured_content=structured)


def _error(text: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)


def _tool_name(id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", id)


def _json_schema(schema: Any) -> dict[str, Any]:
    if schema is None:
        return {}
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return TypeAdapter(schema).json_schema()


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)

