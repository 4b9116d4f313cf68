"""The put outcomes' verdicts every caller of a put reads (one place decides them)."""

from __future__ import annotations

from rocketstore.status import PutStatus


def test_stored_means_in_the_commitlog_whatever_the_wait_said() -> None:
    stored = {s for s in PutStatus if s.stored}
    assert stored == {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
    assert {s for s in PutStatus if s.ok} == {PutStatus.PUT_OK}


def test_never_storable_only_for_a_refused_message() -> None:
    refused = {s for s in PutStatus if s.never_storable}
    assert refused == {PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED}
    assert not any(s.stored for s in refused)
