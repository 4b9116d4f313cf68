"""A slave's side of replication (RocketMQ 4.9's HAService.HAClient).

Layer: broker. Connects to the master's haListenPort (haMasterAddress, or the haServerAddr
the name servers answer the slave's registration with), reports its CommitLog max offset
(:func:`~rocketstore.format.ha.encode_report`) on connect, after each transfer it appended
and every haSendHeartbeatInterval, and appends each transfer's bytes at exactly the offset
the master gives (:meth:`MessageStore.append_replicated`: the files stay byte-identical to
the master's; the dispatcher builds queues and index from them).

A transfer whose offset is not the slave's end closes the connection and it connects again
(a slave with an empty store takes whatever file boundary the master starts at); so do a
corrupt frame (logged, nothing appended), a master silent for haHousekeepingInterval and
any I/O error, after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time

from rocketstore.broker.broker_config import BrokerConfig
from rocketstore.broker.timeouts import BackgroundLoop
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError, IncompleteDataError, StoreError
from rocketstore.format import ha
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

# The pause before connecting again (HAClient waits 5 s; tests shorten it).
RECONNECT_PAUSE_S = 1.0
CONNECT_TIMEOUT_S = 3.0
READ_BYTES = 1024 * 1024


class ReplicationSlave(BackgroundLoop):
    def __init__(
        self,
        store: MessageStore,
        config: BrokerConfig,
        *,
        reconnect_pause_s: float | None = None,
    ):
        self.store = store
        self.config = config
        self.master_address = config.ha_master_address or ""
        self.reconnect_pause_s = reconnect_pause_s
        self.connected = asyncio.Event()
        self.reported_offset = 0
        self.transfers = 0
        self._writer: asyncio.StreamWriter | None = None

    def update_master_address(self, address: str) -> None:
        """A new master (from the name servers' registration answer): the connection to
        the old one, if any, is dropped and the next one goes to this address."""
        if address and address != self.master_address:
            log.info("replication: master address %r -> %r", self.master_address, address)
            self.master_address = address
            if self._writer is not None:
                self._writer.close()

    def runtime_info(self) -> dict[str, str]:
        """A slave's figures for brokerStatus (rocketstore's names: RocketMQ 4.9.8 reports
        no replication figures there)."""
        return {
            "haMasterAddress": self.master_address,
            "haConnectedToMaster": "true" if self.connected.is_set() else "false",
            "haReportedOffset": str(self.reported_offset),
        }

    async def _run(self) -> None:
        while True:
            address = self.master_address
            if address:
                try:
                    await self._follow(address)
                except (OSError, TimeoutError) as e:
                    log.info("replication: master %s: %s", address, e)
                except (CorruptDataError, ConfigError, StoreError) as e:
                    log.error("replication: master %s: %s; connecting again", address, e)
                finally:
                    self.connected.clear()
                    self._writer = None
            pause = self.reconnect_pause_s
            await asyncio.sleep(RECONNECT_PAUSE_S if pause is None else pause)

    async def _follow(self, address: str) -> None:
        host, port = parse_host(address, what="master HA address")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), CONNECT_TIMEOUT_S
        )
        self._writer = writer
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            log.info("replication: following master %s", address)
            await self._exchange(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> float:
        writer.write(ha.encode_report(offset))
        await writer.drain()
        self.reported_offset = offset
        return time.monotonic()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        config = self.config
        heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = config.ha_housekeeping_interval_ms / 1000
        last_report = await self._report(writer, self.store.max_commit_log_offset())
        self.connected.set()
        last_read = time.monotonic()
        buf = bytearray()
        while True:
            wait = max(0.0, heartbeat_s - (time.monotonic() - last_report))
            try:
                chunk = await asyncio.wait_for(reader.read(READ_BYTES), wait or 0.001)
            except TimeoutError:
                chunk = None
            now = time.monotonic()
            if chunk == b"":
                log.info("replication: master closed the connection")
                return
            if chunk is None:
                if now - last_read > housekeeping_s:
                    log.warning("replication: master silent for %.0f s; closing", housekeeping_s)
                    return
                last_report = await self._report(writer, self.store.max_commit_log_offset())
                continue
            last_read = now
            buf += chunk
            used, end = await asyncio.to_thread(self._append_transfers, buf)
            del buf[:used]
            if end > self.reported_offset or now - last_report >= heartbeat_s:
                last_report = await self._report(writer, end)

    def _append_transfers(self, buf: bytearray) -> tuple[int, int]:
        """Append every whole transfer in ``buf`` (a worker thread's call); how many bytes
        of ``buf`` they took and the store's end after them."""
        position = 0
        view = memoryview(buf)
        try:
            while True:
                try:
                    transfer = ha.decode_transfer(view, position)
                except IncompleteDataError:
                    break
                end = self.store.max_commit_log_offset()
                if end not in (0, transfer.offset):  # an empty store takes any file start
                    raise CorruptDataError(
                        f"master sent offset {transfer.offset}, this slave's CommitLog ends "
                        f"at {end}"
                    )
                if not transfer.is_heartbeat:
                    self.store.append_replicated(transfer.offset, transfer.body)
                    self.transfers += 1
                position = transfer.end
            return position, self.store.max_commit_log_offset()
        finally:
            view.release()
