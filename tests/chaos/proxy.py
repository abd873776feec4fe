"""A small TCP proxy for the chaos tests: forwards bytes both ways until frozen (then it
holds them: a frozen server or a dead network as the client sees it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc


class FreezableProxy:
    """Listens on 127.0.0.1:``port`` and forwards to ``target``; ``frozen`` holds traffic."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.thawed = anyio.Event()
        self.thawed.set()

    def freeze(self) -> None:
        self.thawed = anyio.Event()

    def thaw(self) -> None:
        self.thawed.set()

    async def _pipe(self, source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
        try:
            async for chunk in source:
                await self.thawed.wait()
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await sink.aclose()

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            try:
                server = await anyio.connect_tcp(*self.target)
            except OSError:
                return
            async with server, anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, client, server)
                tg.start_soon(self._pipe, server, client)


@asynccontextmanager
async def freezable_proxy(host: str, port: int) -> AsyncIterator[FreezableProxy]:
    """A running ``FreezableProxy`` to ``host:port``, stopped at the end."""
    proxy = FreezableProxy(host, port)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy._serve)
        try:
            yield proxy
        finally:
            proxy.thaw()
            tg.cancel_scope.cancel()
