"""Replication with real processes on loopback: ``rocketstore namesrv``, a SYNC_MASTER and a
SLAVE ``rocketstore broker`` (the slave learns its master from the name server), and the
Python ``rocketmq`` client (C++ inside) producing with send_sync as fast as it can.

The slave is killed with SIGKILL mid-stream and started again (it catches up from its own
end), then the master is killed with SIGKILL. Checked offline on both stores: every send
answered SEND_OK is on the slave, found through its consume queue with its msgId
(UNIQ_KEY) and body, and the slave's CommitLog is a byte prefix of the master's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rocketstore import MessageStore
from rocketstore.paths import COMMITLOG_DIR

from .test_kill_broker import CLIENT, TOPIC, client_env, free_port, read_acks

__all__ = ["client_env"]  # the fixture, shared with the broker kill tests

FILES = """\
mappedFileSizeCommitLog=262144
mappedFileSizeConsumeQueue=12000
maxHashSlotNum=512
maxIndexNum=2048
brokerName=broker-ha
"""
ACKS_PER_STEP = 150
STEP_TIMEOUT_S = 60


class Process:
    """A rocketstore command, its stderr kept in a list (drained so it never stalls)."""

    def __init__(self, args: list[str], ready: str = "Ctrl-C stops"):
        self.args = args
        self.log: list[str] = []
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "rocketstore.cli.main", *args],
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr = self.popen.stderr
        assert stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = stderr.readline()
            self.log.append(line.rstrip())
            if ready in line:
                threading.Thread(target=self._drain, daemon=True).start()
                return
            if not line and self.popen.poll() is not None:
                raise AssertionError(f"{args[:3]} exited early: {self.log[-20:]}")
        raise AssertionError(f"{args[:3]} did not start in time: {self.log[-20:]}")

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.log.append(line.rstrip())

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def _wait_acks(path: Path, count: int, producer: subprocess.Popen[bytes], err: Path) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while len(read_acks(path)) < count:
        assert producer.poll() is None, err.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, (
            f"only {len(read_acks(path))} of {count} acks: "
            + err.read_text(errors="replace")[-2000:]
        )
        time.sleep(0.05)


def _commitlog(store: Path) -> bytes:
    directory = store / COMMITLOG_DIR
    return b"".join((directory / name).read_bytes() for name in sorted(os.listdir(directory)))


def _stored(store: Path) -> dict[str, bytes | None]:
    """UNIQ_KEY -> body of every message of the topic, found through its queues."""
    found: dict[str, bytes | None] = {}
    with MessageStore.open(store, read_only=True) as opened:
        for queue_id in opened.topics().get(TOPIC, []):
            offset = opened.min_offset(TOPIC, queue_id)
            while offset < opened.max_offset(TOPIC, queue_id):
                result = opened.get_messages("check", TOPIC, queue_id, offset, 32)
                for message in result.messages:
                    assert message.uniq_key is not None
                    found[message.uniq_key] = message.body
                offset = result.next_begin_offset
    return found


def test_sync_master_killed_loses_nothing_acknowledged(
    tmp_path: Path, client_env: dict[str, str]
) -> None:
    namesrv_port, master_port, slave_port, ha_port = (free_port() for _ in range(4))
    namesrv = f"127.0.0.1:{namesrv_port}"
    master_conf = tmp_path / "master.conf"
    master_conf.write_text(FILES + f"brokerRole=SYNC_MASTER\nhaListenPort={ha_port}\n")
    slave_conf = tmp_path / "slave.conf"
    slave_conf.write_text(FILES + "brokerRole=SLAVE\nbrokerId=1\nhaSendHeartbeatInterval=1000\n")
    master_store, slave_store = tmp_path / "master", tmp_path / "slave"

    def master_args() -> list[str]:
        return ["-c", str(master_conf), "broker", "--namesrv", namesrv, "--store",
                str(master_store), "--listen", f"127.0.0.1:{master_port}"]  # fmt: skip

    def slave_args() -> list[str]:
        return ["-c", str(slave_conf), "broker", "--namesrv", namesrv, "--store",
                str(slave_store), "--listen", f"127.0.0.1:{slave_port}"]  # fmt: skip

    processes: list[Process] = []
    acks, stop, err = tmp_path / "acks", tmp_path / "stop", tmp_path / "producer.err"
    producer: subprocess.Popen[bytes] | None = None
    try:
        processes.append(Process(["namesrv", "--listen", namesrv]))
        processes.append(master := Process(master_args()))
        processes.append(slave := Process(slave_args()))
        with err.open("wb") as sink:
            producer = subprocess.Popen(
                [sys.executable, str(CLIENT), "produce", namesrv, TOPIC, str(acks), str(stop)],
                stdout=subprocess.DEVNULL,
                stderr=sink,
                env=client_env,
            )
        _wait_acks(acks, ACKS_PER_STEP, producer, err)
        slave.kill()  # mid-stream: sends now answer SLAVE_NOT_AVAILABLE (not SEND_OK)
        processes.append(slave := Process(slave_args()))
        _wait_acks(acks, 2 * ACKS_PER_STEP, producer, err)  # caught up, in sync again
        master.kill()
        stop.touch()
        producer.wait(30)
        slave.stop()
        acknowledged = read_acks(acks)
        on_slave = _stored(slave_store)
        missing = sorted(i for i, msg_id in acknowledged.items() if msg_id not in on_slave)
        assert not missing, f"{len(missing)} acknowledged sends not on the slave: {missing[:10]}"
        for i, msg_id in acknowledged.items():
            assert on_slave[msg_id] == f"body-{i}".encode()
        slave_bytes, master_bytes = _commitlog(slave_store), _commitlog(master_store)
        with MessageStore.open(slave_store, read_only=True) as opened:
            end = opened.max_commit_log_offset()
        assert end > 0
        assert slave_bytes[:end] == master_bytes[:end]
        assert "following master" in "\n".join(slave.log)
    finally:
        stop.touch()
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait()
        for process in reversed(processes):
            process.stop()
