"""Broker processes a ``serve --brokers N`` runs beside its own, one per extra core.

Layer: broker. A :class:`ChildBrokers` is a service (start/stop, as the apps are): it starts
each child (a ``rocketstore ... broker`` command line the CLI built) as a process of its own,
waits until it listens, and stops them all with SIGTERM (a clean shutdown each: store
closed, offsets written), SIGKILL past a grace period. A child that cannot start fails the
start, and the ones already up are stopped. On Linux each child asks the kernel for a
SIGTERM when serve ends (PR_SET_PDEATHSIG, :func:`die_with_serve`), so a SIGKILLed serve
leaves none running. Python runs one event loop per process on one
core at a time; RocketMQ's own way to spread a topic over more is more brokers behind one
name server, and this is that, started by one command (docs/broker.md "More cores").
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketstore.config import parse_host

log = logging.getLogger(__name__)

# The serve process's pid, in a child's environment: the child arms its death signal.
SERVE_PID_ENV = "ROCKETSTORE_SERVE_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# How long a child may take to listen, and to stop after SIGTERM.
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class ChildBroker:
    """One child: its command line and the address it will listen on."""

    argv: Sequence[str]
    listen: str


class ChildBrokers:
    def __init__(self, children: Callable[[], Sequence[ChildBroker]]):
        """``children``: called at the start (after the services before this one started:
        the name server's real address is known then)."""
        self.children = children
        self.processes: list[subprocess.Popen[bytes]] = []

    async def start(self) -> None:
        try:
            env = {**os.environ, SERVE_PID_ENV: str(os.getpid())}
            for child in self.children():
                process = subprocess.Popen(list(child.argv), env=env)
                self.processes.append(process)
                await _until_listening(process, child.listen)
                log.info("child broker pid %d listening on %s", process.pid, child.listen)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                await asyncio.to_thread(process.wait, STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                log.warning("child broker pid %d did not stop; killing it", process.pid)
                process.kill()
                await asyncio.to_thread(process.wait)
        self.processes.clear()


def die_with_serve() -> bool:
    """In a child broker of ``serve --brokers`` (SERVE_PID_ENV set), on Linux: ask the
    kernel to send this process SIGTERM (its clean shutdown) when serve ends, a SIGKILL
    included, and stop now if serve is already gone. Returns whether the signal is armed
    (False: not a child, not Linux, or no prctl in libc; a SIGKILLed serve then leaves the
    child running). The kernel sends it when the thread that started the child ends:
    serve's event loop thread, which lives as long as serve."""
    serve_pid = os.environ.pop(SERVE_PID_ENV, None)  # (not handed down further)
    if serve_pid is None or not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    if prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
        return False
    if str(os.getppid()) != serve_pid:  # serve died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
    return True


async def _until_listening(process: subprocess.Popen[bytes], listen: str) -> None:
    host, port = parse_host(listen, what="listen address")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise OSError(f"child broker for {listen} exited with status {process.returncode}")
        with contextlib.suppress(OSError):
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        await asyncio.sleep(0.1)
    raise OSError(f"child broker for {listen} did not listen within {START_TIMEOUT_S:.0f} s")
