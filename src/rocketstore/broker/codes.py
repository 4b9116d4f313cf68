"""RocketMQ's request and response codes: moved to :mod:`rocketstore.remoting.codes` (the
Spark source speaks the protocol too); re-exported here for the broker's modules.

Layer: broker.
"""

from __future__ import annotations

from rocketstore.remoting.codes import LANGUAGES, RequestCode, ResponseCode

__all__ = ["LANGUAGES", "RequestCode", "ResponseCode"]
