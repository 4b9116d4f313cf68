"""The remoting frame and header codec: moved to :mod:`rocketstore.remoting.codec` (the
Spark source speaks the protocol too); re-exported here for the broker's modules.

Layer: broker.
"""

from __future__ import annotations

from rocketstore.remoting.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    ProtocolError,
    RemotingCommand,
    RequestFieldError,
    coerce_ext_fields,
    decode_command,
    decode_frame,
    encode_command,
    encode_header_json,
    ext_bool,
    ext_int,
    ext_java_int,
    ext_str,
    frame_length,
    loads_json,
    replace_lone_surrogates,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "SERIALIZE_JSON",
    "SERIALIZE_ROCKETMQ",
    "ProtocolError",
    "RemotingCommand",
    "RequestFieldError",
    "coerce_ext_fields",
    "decode_command",
    "decode_frame",
    "encode_command",
    "encode_header_json",
    "ext_bool",
    "ext_int",
    "ext_java_int",
    "ext_str",
    "frame_length",
    "loads_json",
    "replace_lone_surrogates",
]
