"""RocketMQ's request and response codes (RequestCode.java, ResponseCode.java, 4.9.8).

Layer: broker, pure constants. Only the codes rocketstore speaks or names in a reply are
listed; every other request code is answered with REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    GET_KV_CONFIG = 101
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    FILTER_DATA_NOT_EXIST = 27


# LanguageCode.java, by ordinal: the binary (ROCKETMQ) header carries the ordinal, the JSON
# header the name.
LANGUAGES = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
)
