"""A slave whose CommitLog has more than its (new) master: cut back to the master's end,
the cut bytes kept under the store, then byte-identical to the master (rocketstore
compare, run as its own process); an empty master is refused (the slave keeps its data
and serves reads) unless haAllowFullTruncate; the master's end is also learned over
remoting (GET_BROKER_RUNTIME_INFO), as from a Java master."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from rocketstore.broker import ha_slave
from rocketstore.broker.app import BrokerApp
from rocketstore.paths import COMMITLOG_DIR
from tests.cli.cli_helpers import run_cli_process
from tests.unit.broker.broker_helpers import until
from tests.unit.broker.test_ha import TOPIC, _files, _message, _options, within


@pytest.fixture(autouse=True)
def _quick_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ha_slave, "RECONNECT_PAUSE_S", 0.05)


async def _master(root: Path) -> BrokerApp:
    app = BrokerApp(_options(root, broker_role="ASYNC_MASTER"))
    await app.start()
    return app


async def _slave_of(root: Path, master: BrokerApp, **settings: object) -> BrokerApp:
    assert master.replication_master is not None
    app = BrokerApp(
        _options(
            root,
            None,
            broker_role="SLAVE",
            broker_id=1,
            ha_master_address=master.replication_master.address,
            **settings,
        )
    )
    await app.start()
    return app


async def _send(master: BrokerApp, numbers: range) -> None:
    assert master.ctx is not None
    for i in numbers:
        assert (await master.ctx.put(_message(i), 10)).ok


async def _caught_up(slave: BrokerApp, master: BrokerApp) -> None:
    assert slave.ctx is not None and master.ctx is not None
    slave_store, master_store = slave.ctx.store, master.ctx.store
    await until(
        lambda: slave_store.max_commit_log_offset() == master_store.max_commit_log_offset(),
        "the slave's end",
    )


async def _old_master_with_two_slaves(tmp_path: Path) -> tuple[int, int]:
    """An old master whose slave "new" stopped after 120 messages and whose slave "slave"
    got 200; the new master's end and the slave's."""
    old = await _master(tmp_path / "old")
    new = await _slave_of(tmp_path / "new", old)
    slave = await _slave_of(tmp_path / "slave", old)
    try:
        await _send(old, range(120))
        await _caught_up(new, old)
        await _caught_up(slave, old)
        assert new.ctx is not None and slave.ctx is not None
        new_end = new.ctx.store.max_commit_log_offset()
        await new.stop()
        await _send(old, range(120, 200))
        await _caught_up(slave, old)
        return new_end, slave.ctx.store.max_commit_log_offset()
    finally:
        await slave.stop()
        await old.stop()


def _compare(a: Path, b: Path) -> dict[str, object]:
    done = run_cli_process("--json", "compare", a, b)
    assert done.code == 0, done.err
    (answer,) = [json.loads(line) for line in done.out.splitlines() if line.strip()]
    assert isinstance(answer, dict)
    return answer


def test_slave_ahead_is_cut_back_then_follows_byte_identical(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        new_end, slave_end = await _old_master_with_two_slaves(tmp_path)
        assert slave_end > new_end
        # The lagging slave becomes the master (same files, now a master).
        new = await _master(tmp_path / "new")
        slave = await _slave_of(tmp_path / "slave", new)
        try:
            assert slave.replication_slave is not None and slave.ctx is not None
            follower = slave.replication_slave
            await until(lambda: follower.truncations == 1, "the cut")
            assert slave.ctx.store.max_commit_log_offset() == new_end
            await _send(new, range(500, 650))
            await _caught_up(slave, new)
            store = slave.ctx.store
            store.wait_dispatched()
            assert [m.body for m in store.query_messages(TOPIC, "k510")] == [_message(510).body]
            assert store.query_messages(TOPIC, "k150") == []  # only the old master had it
            info = follower.runtime_info()
            assert (info["haTruncations"], info["haRefusal"]) == ("1", "")
        finally:
            await slave.stop()
            await new.stop()
        assert _files(tmp_path / "slave") == _files(tmp_path / "new")
        answer = _compare(tmp_path / "new", tmp_path / "slave")
        assert answer["verdict"] == "identical", answer
        # The cut bytes are kept beside the store, with what they were.
        (kept,) = (tmp_path / "slave").glob("truncated-*")
        manifest = json.loads((kept / "truncation.json").read_text())
        assert (manifest["truncatedTo"], manifest["commitLogMaxOffset"]) == (new_end, slave_end)
        assert f"ends at {new_end}" in manifest["reason"]
        assert sum(p["to"] - p["from"] for p in manifest["pieces"]) == slave_end - new_end

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    text = caplog.text
    assert "past this master's end" in text  # the master's line, once per connection
    assert "bytes more than its master" in text and "kept in" in text


def test_empty_master_is_refused_unless_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        old = await _master(tmp_path / "old")
        slave = await _slave_of(tmp_path / "slave", old)
        try:
            await _send(old, range(150))
            await _caught_up(slave, old)
            assert slave.ctx is not None
            old_end = slave.ctx.store.max_commit_log_offset()
        finally:
            await slave.stop()
            await old.stop()
        before = _files(tmp_path / "slave")
        empty = await _master(tmp_path / "empty")
        slave = await _slave_of(tmp_path / "slave", empty)
        try:
            assert slave.replication_slave is not None and slave.ctx is not None
            follower = slave.replication_slave
            await until(lambda: bool(follower.refusal), "the refusal")
            assert "erase this slave's whole copy" in follower.runtime_info()["haRefusal"]
            await asyncio.sleep(0.3)  # several reconnect pauses: still refused, still whole
            assert follower.truncations == 0 and follower.refusal
            assert slave.ctx.store.max_commit_log_offset() == old_end
            # It keeps serving reads.
            found = slave.ctx.store.get_messages("g", TOPIC, 1, 10, 1).messages
            assert [m.body for m in found] == [_message(21).body]
        finally:
            await slave.stop()
        assert _files(tmp_path / "slave") == before
        assert not list((tmp_path / "slave").glob("truncated-*"))
        # Allowed: everything is cut (and kept), and it follows the empty master.
        slave = await _slave_of(tmp_path / "slave", empty, ha_allow_full_truncate=True)
        try:
            assert slave.replication_slave is not None
            follower = slave.replication_slave
            await until(lambda: follower.truncations == 1, "the cut")
            await within(follower.connected.wait())
            await _send(empty, range(1000, 1040))
            await _caught_up(slave, empty)
        finally:
            await slave.stop()
            await empty.stop()
        assert _files(tmp_path / "slave") == _files(tmp_path / "empty")
        (kept,) = (tmp_path / "slave").glob("truncated-*")
        kept_bytes = b"".join(p.read_bytes() for p in sorted(kept.glob("0*")))
        assert kept_bytes == b"".join(before.values()).rstrip(b"\0")[: len(kept_bytes)]
        assert len(list((tmp_path / "slave" / COMMITLOG_DIR).iterdir())) >= 1

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    refusals = [r for r in caplog.records if "REFUSED" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.ERROR  # logged once


def test_master_end_learned_over_remoting(tmp_path: Path) -> None:
    async def main() -> None:
        master = await _master(tmp_path / "master")
        try:
            await _send(master, range(30))
            assert master.ctx is not None
            follower = ha_slave.ReplicationSlave(master.ctx.store, master.ctx.config)
            assert await follower._master_end() is None  # no address known
            follower.update_master_address("", master.address)
            assert await follower._master_end() == master.ctx.store.max_commit_log_offset()
            follower.update_master_address("", "127.0.0.1:1")
            assert await follower._master_end() is None
        finally:
            await master.stop()

    asyncio.run(main())
