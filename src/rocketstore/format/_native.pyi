# Types of the C extension built from _native_c/ (bound in rocketstore.format.native).
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, overload

import numpy.typing as npt
from _typeshed import ReadableBuffer as _ReadableBuffer
from _typeshed import WriteableBuffer as _WriteableBuffer

# numpy arrays are buffers; numpy's stubs say so only from Python 3.12 (__buffer__).
ReadableBuffer: TypeAlias = _ReadableBuffer | npt.NDArray[Any]
WriteableBuffer: TypeAlias = _WriteableBuffer | npt.NDArray[Any]

def masked_crc32(data: ReadableBuffer, /) -> int: ...
def crc_backend() -> str: ...
def encode_batch(
    messages: Sequence[object],
    message_type: type,
    topics: dict[str, bytes],
    hosts: dict[str, bytes],
    queue_keys: dict[tuple[str, int], str],
    store_host: bytes,
    max_body: int,
    max_record: int,
    file_size: int,
    in_batch: bool,
    now_ms: int,
    /,
) -> tuple[bytearray, bytes, list[str], int] | None: ...
def encode_columns(
    topic: str,
    topic_bytes: bytes,
    bodies: list[Any],  # bytes each (the C code checks every value's type)
    queue_ids: int | list[Any],
    names: tuple[Any, ...],
    columns: tuple[Any, ...],
    rows: list[Any] | None,
    born_host: bytes,
    store_host: bytes,
    born_ms: int,
    queue_keys: dict[tuple[str, int], str],
    max_body: int,
    max_record: int,
    file_size: int,
    chunk_body: int,
    chunk_records: int,
    start: int,
    out: WriteableBuffer,
    position: int,
    room: int,
    stamp: tuple[
        dict[str, int],
        int,
        int,
        WriteableBuffer,
        WriteableBuffer,
        WriteableBuffer,
        WriteableBuffer,
        int,
    ]
    | None,
    flags: int | list[Any] = ...,
    sys_flag: int = ...,
    reconsume_times: int = ...,
    texts: list[Any] | None = ...,
    /,
) -> tuple[int, bytes, list[str], int, int] | bool | None: ...
@overload
def append_encoded(
    dest: WriteableBuffer | None,
    position: int,
    blob: WriteableBuffer,
    meta: bytes,
    keys: list[str],
    table: dict[str, int],
    physical_start: int,
    timestamp: int,
    outs: None = None,
    row: int = 0,
    /,
) -> bytes: ...
@overload
def append_encoded(
    dest: WriteableBuffer | None,
    position: int,
    blob: WriteableBuffer,
    meta: bytes,
    keys: list[str],
    table: dict[str, int],
    physical_start: int,
    timestamp: int,
    outs: tuple[WriteableBuffer, WriteableBuffer, WriteableBuffer, WriteableBuffer],
    row: int = 0,
    /,
) -> None: ...
@overload
def append_encoded(
    dest: WriteableBuffer | None,
    position: int,
    blob: WriteableBuffer,
    meta: bytes,
    keys: list[str],
    table: dict[str, int],
    physical_start: int,
    timestamp: int,
    outs: tuple[WriteableBuffer, WriteableBuffer, WriteableBuffer, WriteableBuffer] | None,
    row: int = 0,
    /,
) -> bytes | None: ...
def put_results(
    result_type: type[Any],
    status: object,
    ok: bool,
    meta: bytes,
    queue_offsets: bytes,
    physical_start: int,
    timestamp: int,
    store_host: bytes,
    /,
) -> list[Any]: ...
def put_one(
    message: object,
    message_type: type,
    topics: dict[str, bytes],
    hosts: dict[str, bytes],
    queue_keys: dict[tuple[str, int], str],
    store_host: bytes,
    max_body: int,
    max_record: int,
    file_size: int,
    born_now_ms: int,
    dest: WriteableBuffer,
    position: int,
    file_from_offset: int,
    table: dict[str, int],
    store_timestamp: int,
    result_type: type[Any],
    status: object,
    ok: bool,
    /,
) -> Any: ...
def walk_starts(
    buf: ReadableBuffer, position: int, end: int, file_size: int, out: WriteableBuffer, /
) -> tuple[int, int, int]: ...
def decode_chunk(
    buf: ReadableBuffer,
    base: int,
    positions: ReadableBuffer,
    file_size: int,
    ids: dict[bytes, int],
    names: list[str],
    table: WriteableBuffer,
    ok: WriteableBuffer,
    /,
) -> None: ...
def crc_mismatch(
    buf: ReadableBuffer,
    body_position: ReadableBuffer,
    body_length: ReadableBuffer,
    body_crc: ReadableBuffer,
    /,
) -> tuple[int, int] | None: ...
def set_verbatim_type(type_: type[dict[str, str]], /) -> None: ...
def java_hash(text: str, /) -> int: ...
def dispatch_facts(
    buf: ReadableBuffer,
    columns: Sequence[ReadableBuffer],
    prefixes: ReadableBuffer,
    schedule_id: int,
    index: bool,
    codes: WriteableBuffer,
    slow: WriteableBuffer,
    out: WriteableBuffer,
    /,
) -> int: ...
def decode_messages(
    buf: ReadableBuffer,
    base: int,
    limit: int,
    offsets: list[int],
    sizes: list[int],
    read_body: bool,
    ext_type: type[Any],
    topics: dict[bytes, str],
    hosts: dict[bytes, str],
    decode_properties: Any,
    /,
) -> list[Any]: ...
def populate_write(buf: WriteableBuffer, start: int, length: int, /) -> int: ...
def msync_range(mapping: ReadableBuffer, start: int, length: int, /) -> None: ...
def write_batch(fd: int, position: int, blob: ReadableBuffer, /) -> None: ...
def transfer_run(
    buf: bytes | bytearray | memoryview, end: int, max_body: int, /
) -> tuple[list[memoryview], int, int, int, int, int]: ...
def write_parts(fd: int, position: int, parts: list[memoryview], /) -> None: ...
def receive_round(
    sock: int,
    buf: WriteableBuffer,
    start: int,
    filled: int,
    end: int,
    max_body: int,
    fd: int,
    position: int,
    room: int,
    budget: int,
    read_bytes: int,
    wait: bool,
    /,
) -> tuple[int, int, int, int, int, int, int, int]: ...
def time_search(
    queue_files: list[Any],
    queue_file_size: int,
    lo: int,
    hi: int,
    log_files: list[Any],
    log_file_size: int,
    timestamp: int,
    strict: bool,
    /,
) -> int | None: ...
def queue_units(
    topic_id: ReadableBuffer,
    queue_id: ReadableBuffer,
    sys_flag: ReadableBuffer,
    commit_log_offset: ReadableBuffer,
    size: ReadableBuffer,
    tags_code: ReadableBuffer,
    queue_offset: ReadableBuffer,
    /,
) -> list[tuple[int, int, bytes, bytes, int, bool, int, int]]: ...
def index_chain(
    file: ReadableBuffer, hash_slot_num: int, index_count: int, key_hash: int, /
) -> list[tuple[int, int]]: ...
def index_put(
    file: WriteableBuffer,
    hash_slot_num: int,
    first_number: int,
    key_hashes: ReadableBuffer,
    phy_offsets: ReadableBuffer,
    time_diffs: ReadableBuffer,
    /,
) -> int: ...
def chain_private(
    newest: WriteableBuffer,
    oldest: WriteableBuffer,
    first_number: int,
    key_hashes: ReadableBuffer,
    phy_offsets: ReadableBuffer,
    time_diffs: ReadableBuffer,
    out: WriteableBuffer,
    /,
) -> None: ...
def select_units(
    units: ReadableBuffer,
    max_count: int,
    commit_max: int,
    memory_bytes: float,
    mem_bytes: int,
    mem_count: int,
    disk_bytes: int,
    disk_count: int,
    /,
) -> tuple[list[int], list[int], int] | None: ...

class LazyProperties:
    """A data descriptor over a slot holding a properties dict or its raw bytes."""

    def __init__(self, slot: Any, decode: Callable[[bytes], dict[str, str]], /) -> None: ...
    def __get__(self, obj: Any, owner: type | None = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...

class LazyMsgId:
    """A data descriptor over a slot holding an offsetMsgId or its store host bytes."""

    def __init__(self, slot: Any, offset_slot: Any, /) -> None: ...
    def __get__(self, obj: Any, owner: type | None = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...

def key_lookup(
    ext_type: type[Any],
    topics: dict[bytes, str],
    hosts: dict[bytes, str],
    decode_properties: Callable[[bytes], dict[str, str]],
    index_files: list[Any],
    commitlog_files: list[Any],
    file_size: int,
    topic: str,
    key: str,
    unique: bool,
    begin_ms: int,
    end_ms: int,
    max_count: int,
    /,
) -> Any: ...
def pull_messages(
    ext_type: type[Any],
    topics: dict[bytes, str],
    hosts: dict[bytes, str],
    decode_properties: Callable[[bytes], dict[str, str]],
    units: bytes,
    max_count: int,
    commit_max: int,
    memory_bytes: float,
    mem_bytes: int,
    mem_count: int,
    disk_bytes: int,
    disk_count: int,
    commitlog_files: list[Any],
    file_size: int,
    /,
) -> Any: ...
def pull_records(
    units: bytes,
    max_count: int,
    commit_max: int,
    memory_bytes: float,
    mem_bytes: int,
    mem_count: int,
    disk_bytes: int,
    disk_count: int,
    commitlog_files: list[Any],
    file_size: int,
    /,
) -> tuple[bytes, int, int, int] | None: ...
def pull_tagged_records(
    units: bytes,
    max_count: int,
    commit_max: int,
    memory_bytes: float,
    mem_bytes: int,
    mem_count: int,
    disk_bytes: int,
    disk_count: int,
    commitlog_files: list[Any],
    file_size: int,
    codes: tuple[int, ...],
    tags: tuple[bytes, ...],
    /,
) -> tuple[bytes, int, int, int] | None: ...
def batch_columns(
    data: ReadableBuffer, suffix: str, /
) -> tuple[list[bytes], list[int], list[str], int] | None: ...
def offset_msg_ids(store_host: ReadableBuffer, offsets: ReadableBuffer, /) -> str: ...
def send_frame(
    frame: ReadableBuffer, cluster: str, /
) -> tuple[int, int, str, int, int, int, int, int, dict[str, str], str | None, bytes] | None: ...
def send_answer(
    opaque: int,
    version: int,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None,
    /,
) -> bytes | None: ...
def batch_frame(
    frame: ReadableBuffer, cluster: str, /
) -> (
    tuple[
        int,
        int,
        str,
        int,
        int,
        int,
        int,
        str,
        int,
        tuple[list[bytes], list[int], list[str], int],
    ]
    | None
): ...
def batch_answer(
    opaque: int,
    version: int,
    store_host: ReadableBuffer,
    offsets: ReadableBuffer,
    queue_id: int,
    queue_offset: int,
    /,
) -> bytes: ...
def pull_frame(
    frame: ReadableBuffer, /
) -> tuple[int, int, str, str, int, int, int, int, int, int, str | None, str, int] | None: ...
def pull_answer(
    opaque: int,
    version: int,
    code: int,
    remark: str | None,
    next_begin_offset: int,
    min_offset: int,
    max_offset: int,
    suggest_broker_id: int,
    body: ReadableBuffer,
    /,
) -> bytes | None: ...
