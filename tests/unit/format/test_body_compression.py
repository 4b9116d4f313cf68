"""Inflating producer-compressed bodies (format.body_compression): every compression type a
RocketMQ client writes, bodies compressed by RocketMQ 4.9.8's own compressors, and bodies
that do not inflate."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.format.body_compression import (
    CompressionType,
    compression_type,
    inflate,
    is_compressed,
)

GOLDEN = Path(__file__).parents[2] / "golden" / "rocketmq-4.9.8" / "compressed-bodies.json"
COMPRESSED = 0x1


def _java_like(kind: CompressionType, body: bytes) -> bytes:
    """The body compressed as the Java client's compressor for ``kind`` writes it: a zlib
    stream at level 5, an LZ4 frame, a streamed zstd frame without its content size."""
    if kind in (CompressionType.ZLIB, CompressionType.LEGACY_ZLIB):
        return zlib.compress(body, 5)
    if kind is CompressionType.LZ4:
        return bytes(lz4.frame.compress(body))
    return zstandard.ZstdCompressor(level=5, write_content_size=False).compress(body)


def _plain_golden_body() -> bytes:
    # What harness/CompressedBodies.java compresses.
    lines = (f'{{"order": {i}, "note": "rocketmq body"}}\n' for i in range(300))
    return "".join(lines).encode()


def test_bodies_rocketmq_compressed_inflate_to_what_was_sent() -> None:
    golden = json.loads(GOLDEN.read_text())
    plain = _plain_golden_body()
    assert len(plain) == golden["plainLength"]
    kinds = []
    for entry in golden["bodies"]:
        sys_flag = COMPRESSED | entry["typeFlag"]
        assert compression_type(sys_flag) is CompressionType[entry["type"]]
        assert inflate(bytes.fromhex(entry["hex"]), sys_flag) == plain
        kinds.append(entry["type"])
    assert kinds == ["LZ4", "ZSTD", "ZLIB"]


@given(
    body=st.binary(max_size=20_000),
    kind=st.sampled_from(list(CompressionType)),
    bits=st.integers(0, 0xFF).map(lambda b: b & ~COMPRESSED),
)
def test_inflate_round_trips_every_type(body: bytes, kind: CompressionType, bits: int) -> None:
    sys_flag = COMPRESSED | kind << 8 | bits
    assert is_compressed(sys_flag)
    assert inflate(_java_like(kind, body), sys_flag) == body


@given(body=st.binary(max_size=2_000), bits=st.integers(0, 0x7FF))
def test_a_body_not_flagged_compressed_is_kept(body: bytes, bits: int) -> None:
    sys_flag = bits & ~COMPRESSED
    assert inflate(body, sys_flag) is body


@pytest.mark.parametrize("kind", list(CompressionType))
def test_a_damaged_or_cut_body_is_an_error_naming_its_type(kind: CompressionType) -> None:
    packed = _java_like(kind, b"a body long enough to be cut somewhere" * 20)
    sys_flag = COMPRESSED | kind << 8
    for damaged in (b"not compressed at all", packed[: len(packed) // 2]):
        with pytest.raises(CorruptDataError, match=f"does not inflate as {kind.name}"):
            inflate(damaged, sys_flag)


@pytest.mark.parametrize("value", [4, 5, 6, 7])
def test_an_unassigned_compression_type_is_an_error(value: int) -> None:
    sys_flag = COMPRESSED | value << 8
    assert compression_type(sys_flag) is None
    with pytest.raises(CorruptDataError, match=f"compression type {value} .* is unassigned"):
        inflate(zlib.compress(b"x"), sys_flag)
