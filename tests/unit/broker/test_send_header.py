"""SendHeader.parse: a V2 header read by its letters (the fast path every Java producer
takes) gives what the same header with RocketMQ's long names gives, or the same refusal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.processors.send import V2_NAMES, SendHeader
from rocketstore.remoting.codec import RequestFieldError

_numbers = st.integers(-(2**64), 2**64).map(str)
_odd = st.sampled_from(["", "x", "1.0", " 7", "+3", "1_0", "true", "false", "TRUE", "1", "0"])
_values = st.one_of(_numbers, _numbers, _odd, st.text(max_size=6))
_headers = st.dictionaries(st.sampled_from(sorted(V2_NAMES)), _values, max_size=len(V2_NAMES))
_plain = st.fixed_dictionaries(
    {
        "a": st.text(max_size=8),
        "b": st.text(min_size=1, max_size=8),
        "c": st.just("TBW102"),
        "d": st.integers(0, 16).map(str),
        "e": st.integers(-1, 7).map(str),
        "f": st.integers(0, 2**31 - 1).map(str),
        "g": st.integers(0, 2**63 - 1).map(str),
        "h": st.integers(0, 2**31 - 1).map(str),
    },
    optional={
        "i": st.text(max_size=20),
        "j": st.integers(0, 16).map(str) | st.just(""),
        "k": st.sampled_from(["true", "false", ""]),
        "l": st.integers(-1, 16).map(str) | st.just(""),
    },
)


def _parsed(ext: dict[str, str]) -> SendHeader | str:
    try:
        return SendHeader.parse(ext)
    except RequestFieldError as e:
        return f"refused: {e}"


@settings(max_examples=400)
@given(st.one_of(_plain, _headers))
def test_letters_read_as_the_long_names(ext: dict[str, str]) -> None:
    long_names = {V2_NAMES[k]: v for k, v in ext.items()}
    assert _parsed(ext) == _parsed(long_names)


def test_a_long_name_beside_the_letters_takes_the_general_path() -> None:
    ext = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0"}
    assert SendHeader.parse(ext).queue_id == 1
    # Renamed, the later long name wins (a dict keeps the last value of a key).
    assert SendHeader.parse({**ext, "queueId": "3"}).queue_id == 3
