"""Replication between a master and a slave broker in one event loop, over loopback: the
slave's CommitLog ends byte-identical, SYNC_MASTER answers after the slave has the bytes
(FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE otherwise), a slave refuses sends, learns its
master from the name server, catches up from its own end after a restart, and follows
its master again after the master's restart."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import time
from collections.abc import Awaitable
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

import pytest

from rocketstore.broker import ha_slave
from rocketstore.broker.app import BrokerApp, BrokerOptions, NamesrvApp
from rocketstore.broker.broker_config import BrokerConfig, broker_config_from_settings
from rocketstore.config import StoreConfig
from rocketstore.errors import ConfigError
from rocketstore.format import ha, native
from rocketstore.format.message import Message
from rocketstore.paths import COMMITLOG_DIR
from rocketstore.status import PutStatus
from rocketstore.store import MessageStore
from tests.unit.broker.broker_helpers import until

FILE_SIZE = 32 * 1024
T = TypeVar("T")
TOPIC = "HaTopic"


def _store_config() -> StoreConfig:
    return StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE,
        mapped_file_size_consume_queue=20 * 200,
        max_hash_slot_num=100,
        max_index_num=400,
    )


def _options(root: Path, namesrv: list[str] | None = None, **broker: object) -> BrokerOptions:
    return BrokerOptions(
        store_dir=str(root),
        listen="127.0.0.1:0",
        namesrv_addrs=namesrv or [],
        broker=BrokerConfig(**broker),  # type: ignore[arg-type]
        store_config=_store_config(),
        schedule_enable=False,
        register_interval_ms=200,
    )


def _message(i: int) -> Message:
    return Message(
        topic=TOPIC,
        queue_id=i % 2,
        body=f"body-{i}-".encode() * (1 + i % 40),
        properties={"KEYS": f"k{i}"},
        born_host="127.0.0.1:5000",
    )


def _files(root: Path) -> dict[str, bytes]:
    directory = root / COMMITLOG_DIR
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


async def _pair(
    tmp_path: Path, role: str = "SYNC_MASTER", **master_settings: object
) -> tuple[BrokerApp, BrokerApp]:
    master = BrokerApp(_options(tmp_path / "master", None, broker_role=role, **master_settings))
    await master.start()
    assert master.replication_master is not None
    slave = BrokerApp(
        _options(
            tmp_path / "slave",
            broker_role="SLAVE",
            broker_id=1,
            ha_master_address=master.replication_master.address,
        )
    )
    await slave.start()
    assert slave.replication_slave is not None
    await within(slave.replication_slave.connected.wait())
    return master, slave


def _slave_of(tmp_path: Path, ha_port: int, **settings: object) -> BrokerApp:
    """A SLAVE broker (store under ``tmp_path / "slave"``) of the master HA port ``ha_port``
    on loopback."""
    return BrokerApp(
        _options(
            tmp_path / "slave",
            None,
            broker_role="SLAVE",
            broker_id=1,
            ha_master_address=f"127.0.0.1:{ha_port}",
            **settings,
        )
    )


async def within(awaitable: Awaitable[object], timeout_s: float = 10) -> None:
    await asyncio.wait_for(awaitable, timeout_s)


async def _stop(*apps: BrokerApp) -> None:
    for app in apps:
        await app.stop()


@pytest.fixture(autouse=True)
def _quick_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ha_slave, "RECONNECT_PAUSE_S", 0.05)


@pytest.mark.parametrize("native_round", [True, False])
def test_sync_master_answers_after_the_slave_has_the_bytes(
    tmp_path: Path, native_round: bool
) -> None:
    """(With the slave's native receive round when built, and with its Python twin.)"""
    with contextlib.ExitStack() as stack:
        if not native_round:
            stack.enter_context(native.python_only("receive_round"))
        _sync_master_answers(tmp_path)


def _sync_master_answers(tmp_path: Path) -> None:
    async def main() -> None:
        master, slave = await _pair(tmp_path)
        assert master.ctx is not None and slave.ctx is not None
        try:
            results = [await master.ctx.put(_message(i), 10) for i in range(300)]
            assert {r.status for r in results} == {PutStatus.PUT_OK}
            master_store, slave_store = master.ctx.store, slave.ctx.store
            # Acknowledged means on the slave: no wait needed for the CommitLog end.
            end = max(r.commit_log_offset + r.size for r in results)
            assert slave_store.max_commit_log_offset() >= end
            assert end > 2 * FILE_SIZE  # several files, rolled with blanks
            # Concurrent sends share acknowledgements.
            many = await asyncio.gather(*(master.ctx.put(_message(i), 10) for i in range(300, 350)))
            assert {r.status for r in many} == {PutStatus.PUT_OK}
            await until(
                lambda: slave_store.max_commit_log_offset() == master_store.max_commit_log_offset(),
                "the slave's end",
            )
            # Both sides dispatch behind their CommitLog end.
            slave_store.wait_dispatched()
            master_store.wait_dispatched()
            for queue_id in (0, 1):
                assert slave_store.max_offset(TOPIC, queue_id) == master_store.max_offset(
                    TOPIC, queue_id
                )
            found = slave_store.get_messages("g", TOPIC, 1, 100, 1).messages
            assert [m.body for m in found] == [_message(201).body]
            assert [m.body for m in slave_store.query_messages(TOPIC, "k7")] == [_message(7).body]
            # The slave refuses sends as a Java slave's store does.
            refused = await slave.ctx.put(_message(0), 10)
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert "slave" in refused.reason
        finally:
            await _stop(slave, master)
        assert _files(tmp_path / "slave") == _files(tmp_path / "master")

    asyncio.run(main())


def test_sync_master_without_a_slave_or_an_answer(tmp_path: Path) -> None:
    async def main() -> None:
        master = BrokerApp(
            _options(tmp_path / "master", broker_role="SYNC_MASTER", slave_timeout_ms=200)
        )
        await master.start()
        assert master.ctx is not None and master.replication_master is not None
        try:
            alone = await master.ctx.put(_message(0), 10)
            assert alone.status is PutStatus.SLAVE_NOT_AVAILABLE
            assert alone.msg_id  # stored all the same, as RocketMQ answers
            # A "slave" that asks for data and never acknowledges it.
            host, port = master.replication_master.address.split(":")
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(ha.encode_report(alone.commit_log_offset + alone.size))
            await writer.drain()
            replication = master.replication_master
            await until(lambda: bool(replication.connections), "the connection")
            late = await master.ctx.put(_message(1), 10)
            assert late.status is PutStatus.FLUSH_SLAVE_TIMEOUT
            writer.close()
        finally:
            await master.stop()

    asyncio.run(main())


def test_store_submits_wait_for_the_slave_under_sync_master(tmp_path: Path) -> None:
    """MessageStore.submit on a SYNC_MASTER broker's store completes once a slave has
    acknowledged it (submitted on the loop or on another thread), by the verdict a send
    gets: FLUSH_SLAVE_TIMEOUT while no slave acknowledges, SLAVE_NOT_AVAILABLE without
    one; never a hang."""

    async def main() -> None:
        master = BrokerApp(
            _options(tmp_path / "master", broker_role="SYNC_MASTER", slave_timeout_ms=300)
        )
        await master.start()
        assert master.ctx is not None and master.replication_master is not None
        store, replication = master.ctx.store, master.replication_master
        try:
            alone = await within_result(store.submit(_message(0)))
            assert alone.status is PutStatus.SLAVE_NOT_AVAILABLE and alone.msg_id
            # A "slave" that acknowledges when the test says.
            host, port = replication.address.split(":")
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(ha.encode_report(store.max_commit_log_offset()))
            await writer.drain()
            await until(lambda: bool(replication.connections), "the connection")
            late = await within_result(store.submit(_message(1)))
            assert late.status is PutStatus.FLUSH_SLAVE_TIMEOUT  # after slaveTimeout
            assert (await master.ctx.put(_message(2), 10)).status is PutStatus.FLUSH_SLAVE_TIMEOUT
            master.options.broker.slave_timeout_ms = 10_000
            waiting = store.submit_batch([_message(3), _message(4)])
            batch_end = store.max_commit_log_offset()
            from_thread = asyncio.ensure_future(
                asyncio.to_thread(lambda: store.submit(_message(5)).result(10))
            )
            await until(lambda: store.max_commit_log_offset() > batch_end, "the thread's put")
            await asyncio.sleep(0.2)
            assert not waiting.done() and not from_thread.done()
            writer.write(ha.encode_report(batch_end))  # acknowledges the batch only
            await writer.drain()
            batch = await within_result(waiting)
            assert [r.status for r in batch] == [PutStatus.PUT_OK] * 2
            await asyncio.sleep(0.1)
            assert not from_thread.done()
            writer.write(ha.encode_report(store.max_commit_log_offset()))
            await writer.drain()
            assert (await asyncio.wait_for(from_thread, 10)).ok
            # The slave gone: no slave, no wait.
            writer.close()
            await until(lambda: not replication.connections, "the slave gone")
            gone = await within_result(store.submit(_message(6)))
            assert gone.status is PutStatus.SLAVE_NOT_AVAILABLE
            # A stopped master answers what still waits and stops gating the store.
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(ha.encode_report(store.max_commit_log_offset()))
            await writer.drain()
            await until(lambda: bool(replication.connections), "the connection again")
            stranded = store.submit(_message(7))
            await asyncio.sleep(0.1)
            assert not stranded.done()
            await replication.stop()
            assert (await within_result(stranded)).status is PutStatus.FLUSH_SLAVE_TIMEOUT
            assert (await within_result(store.submit(_message(8)))).ok
            writer.close()
        finally:
            await master.stop()

    asyncio.run(main())


def test_async_master_submits_do_not_wait(tmp_path: Path) -> None:
    async def main() -> None:
        master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        assert master.ctx is not None and slave.ctx is not None
        try:
            assert slave.replication_slave is not None
            await slave.replication_slave.stop()  # no slave acknowledges now
            futures = [master.ctx.store.submit(_message(i)) for i in range(20)]
            assert all(f.done() and f.result().ok for f in futures)
            assert (await master.ctx.put(_message(20), 10)).ok
        finally:
            await _stop(slave, master)

    asyncio.run(main())


async def within_result(future: Future[T]) -> T:
    """A store submit's result, awaited on the loop: failing after 10 s, not hanging."""
    return await asyncio.wait_for(asyncio.wrap_future(future), 10)


def test_a_slave_follows_on_uvloop(tmp_path: Path) -> None:
    # uvloop is serve's default loop where it is installed, and its transports are not
    # asyncio.Transport subclasses.
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed")

    async def main() -> None:
        master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        try:
            assert master.ctx is not None and slave.ctx is not None
            for i in range(50):
                assert (await master.ctx.put(_message(i), 10)).ok
            end = master.ctx.store.max_commit_log_offset()
            slave_store = slave.ctx.store
            await until(lambda: slave_store.max_commit_log_offset() == end, "the slave's end")
        finally:
            await _stop(slave, master)
        assert _files(tmp_path / "slave") == _files(tmp_path / "master")

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def test_slave_restarted_catches_up_from_its_own_end(tmp_path: Path) -> None:
    async def main() -> None:
        master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        assert master.ctx is not None
        try:
            for i in range(100):
                assert (await master.ctx.put(_message(i), 10)).ok
            assert slave.ctx is not None
            slave_store = slave.ctx.store
            first_end = master.ctx.store.max_commit_log_offset()
            await until(lambda: slave_store.max_commit_log_offset() == first_end, "the slave's end")
            await slave.stop()
            for i in range(100, 250):
                assert (await master.ctx.put(_message(i), 10)).ok
            again = BrokerApp(slave.options)
            await again.start()
            assert again.ctx is not None and again.replication_slave is not None
            await within(again.replication_slave.connected.wait())
            assert again.replication_slave.reported_offset == first_end  # not from the start
            end = master.ctx.store.max_commit_log_offset()
            again_store = again.ctx.store
            await until(lambda: again_store.max_commit_log_offset() == end, "catch-up")
            await again.stop()
        finally:
            await master.stop()
        assert _files(tmp_path / "slave") == _files(tmp_path / "master")

    asyncio.run(main())


def _free_port_pair() -> int:
    """A loopback port p with p + 1 free too (a master's listen and HA ports, kept across
    its restart)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


@pytest.mark.parametrize(("event_loop", "check_crc"), [("asyncio", False), ("uvloop", True)])
def test_master_restarted_mid_stream_the_slave_follows_again(
    tmp_path: Path, event_loop: str, check_crc: bool
) -> None:
    """The master stopped while its slave is behind and started again on its store and
    ports (the Java interop harness's ``ha_cases.sh restart``, in one process): the slave
    connects again, reports its own end and ends byte-identical, with haCheckBodyCrc on
    or off, on either loop."""
    loop_factory = None
    if event_loop == "uvloop":
        loop_factory = pytest.importorskip(
            "uvloop", reason="uvloop is not installed"
        ).new_event_loop

    async def main() -> None:
        port = _free_port_pair()
        options = _options(tmp_path / "master", broker_role="ASYNC_MASTER")
        options.listen = f"127.0.0.1:{port}"
        master = BrokerApp(options)
        await master.start()
        slave = BrokerApp(
            _options(
                tmp_path / "slave",
                broker_role="SLAVE",
                broker_id=1,
                ha_master_address=f"127.0.0.1:{port + 1}",
                ha_check_body_crc=check_crc,
            )
        )
        await slave.start()
        running: BrokerApp | None = master
        try:
            assert master.ctx is not None and slave.ctx is not None
            assert slave.replication_slave is not None
            await within(slave.replication_slave.connected.wait())
            for i in range(300):  # several 32 KiB files; the slave may still be behind
                assert (await master.ctx.put(_message(i), 10)).ok
            running = None
            await master.stop()
            held = slave.ctx.store.max_commit_log_offset()
            running = BrokerApp(options)
            await running.start()
            assert running.ctx is not None
            for i in range(300, 400):
                assert (await running.ctx.put(_message(i), 10)).ok
            end = running.ctx.store.max_commit_log_offset()
            slave_store = slave.ctx.store
            await until(lambda: slave_store.max_commit_log_offset() == end, "the slave's end")
            assert slave.replication_slave.reported_offset >= held
        finally:
            await _stop(slave, *([running] if running is not None else []))
        assert _files(tmp_path / "slave") == _files(tmp_path / "master")

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())


def test_slave_learns_its_master_from_the_name_server(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = NamesrvApp("127.0.0.1:0")
        await namesrv.start()
        names = [namesrv.address]
        master = BrokerApp(_options(tmp_path / "master", names, broker_role="SYNC_MASTER"))
        slave = BrokerApp(_options(tmp_path / "slave", names, broker_role="SLAVE", broker_id=1))
        try:
            await master.start()
            await slave.start()
            assert slave.replication_slave is not None and master.ctx is not None
            await within(slave.replication_slave.connected.wait())
            assert master.replication_master is not None
            assert slave.replication_slave.master_address == master.replication_master.address
            assert (await master.ctx.put(_message(0), 10)).status is PutStatus.PUT_OK
            entry = namesrv.table.brokers["broker-a"]
            assert entry.addrs == {0: master.address, 1: slave.address}
        finally:
            await _stop(slave, master)
            await namesrv.stop()

    asyncio.run(main())


def test_slave_closes_on_a_transfer_that_does_not_follow(tmp_path: Path) -> None:
    async def main() -> None:
        # A fake master that sends a frame at the wrong offset, then a corrupt header.
        frames: list[bytes] = []
        reports: list[int] = []

        async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            report = await reader.readexactly(8)
            reports.append(int.from_bytes(report, "big"))
            if not frames:  # the slave keeps connecting again: nothing more to send
                writer.close()
                return
            writer.write(frames.pop(0))
            await writer.drain()
            await reader.read()  # until the slave closes

        server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        frames += [ha.encode_transfer(FILE_SIZE + 5, b"xyz"), b"\x00" * 8 + b"\xff" * 4]
        slave = _slave_of(tmp_path, port)
        await slave.start()
        try:
            # (at least: a loaded machine may let a third one in between two looks)
            await until(lambda: len(reports) >= 2, "two connections")
            assert slave.ctx is not None
            assert slave.ctx.store.max_commit_log_offset() == 0
        finally:
            await slave.stop()
            server.close()

    asyncio.run(main())


@pytest.mark.parametrize("native_round", [True, False])
def test_a_slave_heartbeats_a_silent_master_then_closes_and_follows_again(
    tmp_path: Path, native_round: bool
) -> None:
    """A master that sends nothing: the slave reports its end every
    haSendHeartbeatInterval, closes after haHousekeepingInterval without a byte, and
    connects again; heartbeats from the master keep it connected; then a transfer is
    appended and reported at once. (A slave holding data: its receive is the native round
    when built, or the Python twin.)"""
    with contextlib.ExitStack() as stack:
        if not native_round:
            stack.enter_context(native.python_only("receive_round"))
        asyncio.run(_silent_master(tmp_path))


async def _silent_master(tmp_path: Path) -> None:
    master_store = MessageStore.open(tmp_path / "source", _store_config())
    with master_store:
        for i in range(5):
            assert master_store.put(_message(i)).ok
        end = master_store.max_commit_log_offset()
        with master_store.commitlog_data_view(0, end) as view:
            assert view is not None
            data = bytes(view)
        master_store.put(_message(5))
        with master_store.commitlog_data_view(end, 1 << 20) as view:
            assert view is not None
            more = bytes(view)
    with MessageStore.open(tmp_path / "slave", _store_config()) as store:
        store.append_replicated(0, data)
    connections: list[list[tuple[float, int]]] = []
    beat = asyncio.Event()

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reports: list[tuple[float, int]] = []
        connections.append(reports)
        number = len(connections)
        try:
            while True:
                report = await reader.readexactly(8)
                reports.append((time.monotonic(), int.from_bytes(report, "big")))
                if number == 2 and len(reports) == 1:
                    await beat.wait()
                    for _ in range(8):  # a master's heartbeats at its end: no closing
                        writer.write(ha.encode_transfer_header(end, 0))
                        await asyncio.sleep(0.1)
                    writer.write(ha.encode_transfer(end, more))
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    slave = _slave_of(
        tmp_path, port, ha_send_heartbeat_interval_ms=100, ha_housekeeping_interval_ms=500
    )
    await slave.start()
    try:
        await until(lambda: len(connections) >= 2, "a second connection", timeout_s=10)
        first = connections[0]
        assert {offset for _, offset in first} == {end}
        assert len(first) >= 4  # on connect, then about every 0.1 s for 0.5 s
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(first)]
        assert all(0.05 <= gap <= 1.0 for gap in gaps), gaps
        beat.set()
        await until(lambda: any(o == end + len(more) for _, o in connections[1]), "the report")
        assert len(connections) == 2  # the master's heartbeats kept it connected
        assert slave.ctx is not None
        assert slave.ctx.store.max_commit_log_offset() == end + len(more)
    finally:
        await slave.stop()
        server.close()


def test_role_settings_from_broker_conf() -> None:
    config = broker_config_from_settings(
        {
            "brokerRole": "SLAVE",
            "brokerId": "1",
            "haMasterAddress": "127.0.0.1:10912",
            "haSendHeartbeatInterval": "1000",
            "haTransferBatchSize": "65536",
            "slaveTimeout": "500",
            "haCheckBodyCrc": "true",
        }
    )
    assert config.ha_check_body_crc and not broker_config_from_settings({}).ha_check_body_crc
    assert (config.broker_role, config.broker_id, config.ha_master_address) == (
        "SLAVE",
        1,
        "127.0.0.1:10912",
    )
    assert config.ha_send_heartbeat_interval_ms == 1000
    assert (config.ha_transfer_batch_size, config.slave_timeout_ms) == (65536, 500)
    with pytest.raises(ConfigError, match="brokerId"):
        broker_config_from_settings({"brokerRole": "SLAVE"})
    with pytest.raises(ConfigError, match="brokerRole"):
        broker_config_from_settings({"brokerRole": "MASTER"})
    assert broker_config_from_settings({"brokerId": "3"}).broker_id == 0  # masters are 0


def test_default_ha_port_is_the_listen_port_plus_one(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        options = _options(tmp_path / "master")
        options.listen = f"127.0.0.1:{port}"
        master = BrokerApp(options)
        try:
            await master.start()
        except OSError:
            pytest.skip("the port was taken meanwhile")
        try:
            assert master.replication_master is not None
            ha_port = int(master.replication_master.address.rsplit(":", 1)[1])
            assert ha_port == port + 1 or ha_port not in (0, port)
        finally:
            await master.stop()

    asyncio.run(main())
