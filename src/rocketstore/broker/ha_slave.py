"""A slave's side of replication (RocketMQ 4.9's HAService.HAClient).

Layer: broker. Connects to the master's haListenPort (haMasterAddress, or the haServerAddr
the name servers answer the slave's registration with), reports its CommitLog max offset
(:func:`~rocketstore.format.ha.encode_report`) on connect, once what it appended is all
that has arrived (or 1 ms after the last report while more keeps coming) and every
haSendHeartbeatInterval, and appends each transfer's bytes at exactly the offset the master
gives (the files stay byte-identical to the master's; the dispatcher builds queues and
index from them). The connection is read by a thread of its own (:class:`MasterLink`):
with the C extension, a round of ``_native.receive_round`` receives and writes into the
store's :meth:`~MessageStore.replica_window` without the GIL, and
:meth:`~MessageStore.take_replicated` checks what it wrote; without it,
:meth:`~MessageStore.append_replicated_parts` takes each receive's transfers.

A transfer whose offset is not the slave's end closes the connection and it connects again
(a slave with an empty store takes whatever file boundary the master starts at); so do a
corrupt frame (logged, nothing appended), a master silent for haHousekeepingInterval and
any I/O error, after a pause.

A slave whose CommitLog has more than its master's (it followed an old master further than
the new one got) is cut back to the master's end before it follows (RocketMQ 5's
AutoSwitchHAClient truncates; 4.9.8's HAClient would wait until the master passes its
offset and then append the master's later bytes, silently divergent). The master's end
comes from its GET_BROKER_RUNTIME_INFO (commitLogMaxOffset, on the remoting address the
name servers give) before each connection, or from a rocketstore master's heartbeat at its
own end, which it sends a slave reporting more. The cut
(:meth:`MessageStore.truncate_commitlog`) keeps the cut bytes in ``truncated-<time>/``
under the store and is logged; it is refused, loudly, when the master ends below this
slave's first CommitLog offset (an empty or new master disk would erase the whole copy)
unless haAllowFullTruncate, or when no record starts at the master's end here (the copies
differ earlier): the slave then follows nobody and keeps serving reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
import threading
import time

from rocketstore.broker import ha_receive
from rocketstore.broker.broker_config import BrokerConfig, signed
from rocketstore.broker.client import RemotingClient, RemotingClientError, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.ha_receive import (
    MasterBehindError,
    MasterLink,
    Received,
    log_closed,
    log_silent,
    receive_piped,
)
from rocketstore.broker.timeouts import BackgroundLoop
from rocketstore.config import parse_host
from rocketstore.errors import ConfigError, CorruptDataError, StoreError
from rocketstore.format import ha
from rocketstore.store import MessageStore, TruncateStatus

log = logging.getLogger(__name__)

_TIMEVAL = struct.Struct("@ll")  # SO_RCVTIMEO's struct timeval

# The pause before connecting again (HAClient waits 5 s; tests shorten it).
RECONNECT_PAUSE_S = 1.0
CONNECT_TIMEOUT_S = 3.0
# The receive buffer (HAClient reads into 4 MiB): twice the largest transfer, so a
# transfer cut by the end of one read always fits behind what arrived before.
RECEIVE_BYTES = 8 * 1024 * 1024
# The most one receive takes: what arrived is appended while its bytes are still in the
# CPU's cache (copied into the page cache from an 8 MiB backlog, they came from memory:
# 1.2-1.4x the slave's CPU per byte and half its rate, measured side by side on 256 MiB).
READ_BYTES = 1024 * 1024
# While the master's bytes keep coming, what was appended is reported at least this often
# (a SYNC_MASTER send waits for it); at once when nothing more is waiting.
REPORT_EVERY_S = 0.001
# How long the master's GET_BROKER_RUNTIME_INFO answer is waited for.
RUNTIME_INFO_TIMEOUT_S = 3.0


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
        # The master's remoting address (the name servers' masterAddr), asked for its
        # CommitLog end before each connection; "" when unknown.
        self.master_remoting_address = ""
        self.connected = asyncio.Event()
        self.reported_offset = 0
        self.transfers = 0
        self.truncations = 0  # cuts back to a master's end
        # Why this slave follows no master now ("" when it does): a refused cut.
        self.refusal = ""
        self._logged: set[tuple[str, ...]] = set()
        self._writer: MasterLink | None = None

    def update_master_address(self, address: str, remoting_address: str = "") -> None:
        """A new master (from the name servers' registration answer): the connection to
        the old one, if any, is dropped and the next one goes to this address.
        ``remoting_address`` (the answer's masterAddr) is where its CommitLog end is
        asked."""
        if remoting_address:
            self.master_remoting_address = remoting_address
        if address and address != self.master_address:
            log.info("replication: master address %r -> %r", self.master_address, address)
            self.master_address = address
            if self._writer is not None:
                self._writer.close()

    def _log_once(self, level: int, key: tuple[str, ...], message: str, *args: object) -> None:
        """Log ``message`` at ``level`` the first time for ``key``, at DEBUG after (a slave
        retries every reconnect pause)."""
        if key in self._logged:
            log.debug(message, *args)
        else:
            self._logged.add(key)
            log.log(level, message, *args)

    def runtime_info(self) -> dict[str, str]:
        """A slave's figures for brokerStatus (rocketstore's names: RocketMQ 4.9.8 reports
        no replication figures there)."""
        return {
            "haMasterAddress": self.master_address,
            "haConnectedToMaster": "true" if self.connected.is_set() else "false",
            "haReportedOffset": str(self.reported_offset),
            "haTruncations": str(self.truncations),
            "haRefusal": self.refusal,
        }

    async def _run(self) -> None:
        while True:
            address = self.master_address
            if address:
                try:
                    if await self._agree_with_master(address, await self._master_end()):
                        await self._follow(address)
                except MasterBehindError as e:
                    await self._agree_with_master(address, e.master_end)
                except (OSError, TimeoutError) as e:
                    log.info("replication: master %s: %s", address, e)
                except (CorruptDataError, ConfigError, StoreError) as e:
                    log.error("replication: master %s: %s; connecting again", address, e)
                finally:
                    self.connected.clear()
                    self._writer = None
            pause = self.reconnect_pause_s
            await asyncio.sleep(RECONNECT_PAUSE_S if pause is None else pause)

    async def _master_end(self) -> int | None:
        """The master's CommitLog max offset from its GET_BROKER_RUNTIME_INFO, or None when
        its remoting address is unknown or it does not answer (logged once)."""
        address = self.master_remoting_address
        if not address:
            return None
        client = RemotingClient(address)
        try:
            answer = await client.invoke(
                signed(request(RequestCode.GET_BROKER_RUNTIME_INFO), self.config),
                RUNTIME_INFO_TIMEOUT_S,
            )
            if answer.code != ResponseCode.SUCCESS:
                raise ValueError(f"answered {answer.code}: {answer.remark}")
            table = json.loads(answer.body.decode("utf-8"))["table"]
            end = int(table["commitLogMaxOffset"])
        except (OSError, TimeoutError, RemotingClientError, ValueError, KeyError, TypeError) as e:
            self._log_once(
                logging.WARNING,
                ("no end", address),
                "replication: master %s's CommitLog end not learned (%s); only a rocketstore "
                "master's heartbeat tells this slave it has more than the master",
                address,
                e,
            )
            return None
        finally:
            await client.close()
        return end

    async def _agree_with_master(self, address: str, master_end: int | None) -> bool:
        """Cut this slave's CommitLog back to ``master_end`` when it holds more; False when
        the cut is refused (logged loudly; the slave then follows nobody)."""
        store = self.store
        end = store.max_commit_log_offset()
        if master_end is None:
            return True  # unknown: a rocketstore master's heartbeat may still tell
        if end <= master_end:
            self.refusal = ""
            return True
        low = max(store.min_commit_log_offset(), 0)
        note = (
            f"master {address} (HA) ends at {master_end}; this slave's CommitLog held "
            f"[{low}, {end})"
        )
        report = await asyncio.to_thread(
            store.truncate_commitlog,
            master_end,
            allow_empty=self.config.ha_allow_full_truncate,
            note=note,
        )
        key = (address, str(master_end), str(end), report.status.value)
        if report.status is TruncateStatus.TRUNCATED:
            self.truncations += 1
            self.refusal = ""
            log.warning(
                "replication: this slave had %d bytes more than its master %s (CommitLog "
                "[%d, %d), the master's ends at %d): cut back to %d, %d files deleted, file "
                "%s cut, %d queue units and %d index entries dropped; the cut bytes are kept "
                "in %s",
                report.bytes_cut,
                address,
                low,
                end,
                master_end,
                report.offset,
                len(report.files_deleted),
                report.file_cut or "-",
                report.queue_units_dropped,
                report.index_entries_dropped,
                report.kept_dir,
            )
            return True
        if report.status is TruncateStatus.NOTHING_TO_CUT:
            return True
        if report.status is TruncateStatus.BELOW_MIN_OFFSET:
            self.refusal = (
                f"master {address} ends at {master_end}, at or below this slave's first "
                f"CommitLog offset {low}: following it would erase this slave's whole copy "
                f"[{low}, {end})"
            )
            self._log_once(
                logging.ERROR,
                key,
                "replication: REFUSED: %s (an empty or new master disk?). This slave keeps "
                "its data and serves reads but follows no master; set haAllowFullTruncate="
                "true to let it cut everything (kept aside in truncated-*/ under the store)",
                self.refusal,
            )
            return False
        self.refusal = (
            f"master {address} ends at {master_end}, where no record starts in this "
            f"slave's CommitLog [{low}, {end}): the two copies differ before it"
        )
        self._log_once(
            logging.ERROR,
            key,
            "replication: REFUSED: %s. This slave keeps its data and serves reads but "
            "follows no master; compare the stores (rocketstore compare) and decide",
            self.refusal,
        )
        return False

    async def _follow(self, address: str) -> None:
        host, port = parse_host(address, what="master HA address")
        loop = asyncio.get_running_loop()
        family, kind, proto, _, where = (
            await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await asyncio.wait_for(loop.sock_connect(sock, where), CONNECT_TIMEOUT_S)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(True)
            link = MasterLink(sock)
            self._writer = link
            log.info("replication: following master %s", address)
            self._report(link, self.store.max_commit_log_offset())
            self.connected.set()
            await self._on_thread(link)
        finally:
            sock.close()

    async def _on_thread(self, link: MasterLink) -> None:
        """``_exchange`` on a thread of its own until it returns or raises (raised here);
        cancelled, the link is closed and the thread awaited first (it may be appending)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if not done.done():
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)

        def run() -> None:
            error: BaseException | None = None
            try:
                self._exchange(link)
            except BaseException as e:  # handed to the loop, raised there
                error = e
            with contextlib.suppress(RuntimeError):  # (the loop closed meanwhile)
                loop.call_soon_threadsafe(settle, error)

        thread = threading.Thread(target=run, name="rocketstore-ha-slave", daemon=True)
        thread.start()
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            link.close()
            await asyncio.to_thread(thread.join)
            raise
        finally:
            link.close()

    def _report(self, link: MasterLink, offset: int) -> float:
        link.send(ha.encode_report(offset))
        self.reported_offset = offset
        return time.monotonic()

    def _exchange(self, link: MasterLink) -> None:
        """Receive, append and report until the master closes, stays silent for
        haHousekeepingInterval or sends what cannot be appended (raised), or ``link`` is
        closed; reports every haSendHeartbeatInterval meanwhile. On its own thread; with
        the C extension, :func:`~rocketstore.broker.ha_receive.receive_piped` (a second
        thread takes what it writes).

        While the master's bytes keep coming, what was appended is reported once the
        socket has nothing more waiting or REPORT_EVERY_S after the last report, not
        after every receive: on loopback a report cost the slave a sixth of its
        receiving thread and woke the master each time."""
        config = self.config
        heartbeat_s = config.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = config.ha_housekeeping_interval_ms / 1000
        sock = link.sock
        # A blocking receive that gives up after the heartbeat interval (one syscall; a
        # Python socket timeout polls first); MSG_DONTWAIT makes one that never waits.
        sock.settimeout(None)
        seconds = max(heartbeat_s, 0.001)
        sock.setsockopt(
            socket.SOL_SOCKET,
            socket.SO_RCVTIMEO,
            _TIMEVAL.pack(int(seconds), int(seconds % 1 * 1_000_000)),
        )
        held = Received(bytearray(RECEIVE_BYTES))
        if ha_receive.receive_round is not None:  # (looked up now: tests switch it off)
            receive_piped(self, link, held, READ_BYTES, heartbeat_s, housekeeping_s, REPORT_EVERY_S)
            return
        last_report = last_read = time.monotonic()
        end = self.reported_offset
        while not link.closed:
            unreported = end > self.reported_offset
            got, end = self._receive_python(link, held, not unreported)
            now = time.monotonic()
            if got == 0:
                log_closed(link)
                return
            if got < 0:  # nothing came: all arrived is taken, or the heartbeat is due
                if unreported:
                    last_report = self._report(link, end)
                    continue
                if now - last_read > housekeeping_s:
                    log_silent(housekeeping_s)
                    return
                end = self.store.max_commit_log_offset()
                last_report = self._report(link, end)
                continue
            last_read = now
            self.refusal = ""  # the master's bytes follow this slave's
            since = now - last_report
            if end > self.reported_offset:
                due = since >= REPORT_EVERY_S
            else:
                due = since >= heartbeat_s
            if due:
                last_report = self._report(link, end)

    def _receive_python(self, link: MasterLink, held: Received, wait: bool) -> tuple[int, int]:
        """One receive (waiting for it when ``wait``) and the append of every whole
        transfer held: the bytes received (0: the master closed; -1: none came) and the
        CommitLog's end. The twin of a ``receive_round`` and its take."""
        buf = held.buf
        try:
            with memoryview(buf)[held.filled : held.filled + READ_BYTES] as into:
                got = link.sock.recv_into(into, 0, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return -1, self.store.max_commit_log_offset()
        if got == 0:
            return 0, self.store.max_commit_log_offset()
        held.filled += got
        return got, self._take_held(held)

    def _take_held(self, held: Received) -> int:
        """Append every whole transfer ``held`` has (``_append_transfers``), keeping the
        rest; the CommitLog's end."""
        buf = held.buf
        with memoryview(buf)[held.start : held.filled] as view:
            used, end = self._append_transfers(view)
        held.start += used
        if held.start == held.filled:
            held.start = held.filled = 0
        elif len(buf) - held.filled < READ_BYTES:  # a transfer still arriving: to the front
            left = held.filled - held.start
            buf[:left] = buf[held.start : held.filled]  # (a copy: they may overlap)
            held.start, held.filled = 0, left
        return end

    def _append_transfers(self, buf: memoryview) -> tuple[int, int]:
        """Append every whole transfer in ``buf`` (``_exchange``'s thread); how many bytes
        of ``buf`` they took and the store's end after them. Transfers that follow one
        another are appended as one (a slave's per-call cost is paid per read, not per
        haTransferBatchSize); their frames are read in one call (``ha.transfer_run``).
        A bad header appends nothing of the receive; a transfer that does not follow
        appends those before it."""
        store_end = self.store.max_commit_log_offset()
        run = ha.transfer_run(buf, store_end)
        bodies = run.bodies
        try:
            self.transfers += len(bodies)
            if run.stop == ha.TransferStop.BAD_HEADER:
                ha.decode_transfer(buf, run.position)  # raises CorruptDataError, named
                raise CorruptDataError("bad HA transfer header", position=run.position)
            self._append_run(run.first_offset, bodies)
            if run.stop == ha.TransferStop.BEHIND:
                # A rocketstore master tells a slave reporting more where it ends.
                raise MasterBehindError(run.at, run.end)
            if run.stop == ha.TransferStop.NOT_FOLLOWING:
                raise CorruptDataError(
                    f"master sent offset {run.at}, this slave's CommitLog ends at {run.end}"
                )
            return run.position, self.store.max_commit_log_offset()
        finally:
            bodies.clear()

    def _append_run(self, offset: int, bodies: list[memoryview]) -> None:
        """Append transfers that follow one another as one, straight from the receive
        buffer (one pwritev: no join)."""
        if bodies:
            try:
                self.store.append_replicated_parts(
                    offset, bodies, check_crc=self.config.ha_check_body_crc
                )
            finally:
                bodies.clear()
