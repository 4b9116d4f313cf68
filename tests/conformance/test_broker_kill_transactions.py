"""Kill -9 of the broker with transactions in every state, then a restart on the same
ports: transactions ended before the kill stay ended (a commit is delivered exactly once,
a rollback never), and the open ones are checked with the producer after the restart and
end then. The producer speaks the protocol itself (the installable clients have no
transactional producer); the real Java client's run is tests/conformance/java/."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from rocketstore.broker.client import RemotingClient, request
from rocketstore.broker.codes import RequestCode, ResponseCode
from rocketstore.broker.remoting import RemotingCommand
from rocketstore.store import MessageStore
from tests.conformance.broker_process import free_port, serve_process

TOPIC = "TxKillTopic"
GROUP = "TxKillGroup"
COUNT = 24  # i % 3: 0 committed, 1 rolled back, 2 left open before the kill
SETTINGS = "flushDiskType=SYNC_FLUSH\ntransactionTimeOut=1000\ntransactionCheckInterval=1000\n"


def _uniq(i: int) -> str:
    return f"AC110001000078AB0000000000{i:06X}"


class Producer:
    """A transactional producer on one connection: sends half messages, ends them, and
    answers the broker's checks with a commit."""

    def __init__(self, address: str) -> None:
        self.checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.client = RemotingClient(address, on_request=self.checks.put_nowait)

    async def start(self) -> None:
        beat: dict[str, object] = {"clientID": f"tx-{time.monotonic_ns()}", "consumerDataSet": []}
        beat["producerDataSet"] = [{"groupName": GROUP}]
        answer = await self.client.invoke(
            request(RequestCode.HEART_BEAT, {}, json.dumps(beat).encode())
        )
        assert answer.code == ResponseCode.SUCCESS

    async def send(self, i: int) -> tuple[int, int]:
        properties = "\x02".join(
            f"{k}\x01{v}"
            for k, v in {
                "TRAN_MSG": "true",
                "PGROUP": GROUP,
                "KEYS": f"tx-{i}",
                "UNIQ_KEY": _uniq(i),
                "WAIT": "true",
            }.items()
        )
        ext = {"a": GROUP, "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0"}
        ext |= {"g": str(int(time.time() * 1000)), "h": "0", "i": properties}
        ext |= {"j": "0", "k": "false"}
        answer = await self.client.invoke(
            request(RequestCode.SEND_MESSAGE_V2, ext, f"body-{i}".encode())
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return int(answer.ext_fields["queueOffset"]), int(answer.ext_fields["msgId"][16:], 16)

    async def end(
        self, uniq: str, kind: int, queue_offset: int, commit_log_offset: int, checked: bool
    ) -> None:
        ext = {
            "producerGroup": GROUP,
            "tranStateTableOffset": str(queue_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(kind),
            "fromTransactionCheck": str(checked).lower(),
            "msgId": uniq,
            "transactionId": uniq,
        }
        answer = await self.client.invoke(request(RequestCode.END_TRANSACTION, ext))
        assert answer.code == ResponseCode.SUCCESS, answer.remark


def test_kill_9_keeps_ended_transactions_and_checks_the_open_ones(tmp_path: Path) -> None:
    store = tmp_path / "store"
    settings = tmp_path / "broker.conf"
    settings.write_text(SETTINGS)
    broker_port, namesrv_port = free_port(), free_port()
    address = f"127.0.0.1:{broker_port}"
    server = serve_process(store, broker_port, namesrv_port, settings)
    try:

        async def before_kill() -> None:
            producer = Producer(address)
            await producer.start()
            for i in range(COUNT):
                queue_offset, commit_log_offset = await producer.send(i)
                if i % 3 != 2:  # acknowledged: SUCCESS after a SYNC_FLUSH put
                    kind = 8 if i % 3 == 0 else 12
                    await producer.end(_uniq(i), kind, queue_offset, commit_log_offset, False)
            await producer.client.close()

        asyncio.run(before_kill())
        server.send_signal(signal.SIGKILL)  # before the first check (1 s timeout)
        server.wait(10)
        assert (store / "abort").exists()
        server = serve_process(store, broker_port, namesrv_port, settings)
        open_ones = {_uniq(i) for i in range(COUNT) if i % 3 == 2}

        async def after_restart() -> set[str]:
            producer = Producer(address)
            await producer.start()
            answered: set[str] = set()
            deadline = time.monotonic() + 30
            while answered != open_ones and time.monotonic() < deadline:
                try:
                    check = await asyncio.wait_for(producer.checks.get(), 1)
                except TimeoutError:
                    continue
                assert check.code == RequestCode.CHECK_TRANSACTION_STATE
                fields = check.ext_fields
                await producer.end(
                    fields["msgId"],
                    8,
                    int(fields["tranStateTableOffset"]),
                    int(fields["commitLogOffset"]),
                    True,
                )
                answered.add(fields["msgId"])
            await asyncio.sleep(2.5)  # two more passes: nothing open is left to check
            late = []
            while not producer.checks.empty():
                late.append(producer.checks.get_nowait().ext_fields["msgId"])
            assert late == [], late
            await producer.client.close()
            return answered

        assert asyncio.run(after_restart()) == open_ones
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    with MessageStore.open(store, read_only=True) as reopened:
        delivered: list[str] = []
        for queue_id in reopened.topics().get(TOPIC, []):
            got = reopened.get_messages("check", TOPIC, queue_id, 0, 64)
            delivered += [m.uniq_key or "" for m in got.messages]
    expected = {_uniq(i) for i in range(COUNT) if i % 3 != 1}
    assert sorted(delivered) == sorted(expected)  # each exactly once, no rollback
