"""Which charsets print bodies (``render.check_charset``): Java's names Python knows, not
Python's bytes-to-bytes codecs nor the text codecs that fail on arbitrary bytes."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.cli.render import check_charset

PRINTABLE = ["UTF-8", "GBK", "GB2312", "ISO-8859-1", "US-ASCII", "UTF-16", "UTF-16BE", "Big5",
             "Shift_JIS", "EUC-KR", "windows-1252", "utf_8", "latin1", "cp437"]  # fmt: skip


@pytest.mark.parametrize("name", PRINTABLE)
def test_java_charset_names_python_knows(name: str) -> None:
    assert codecs.lookup(check_charset(name)).name == codecs.lookup(name).name


@pytest.mark.parametrize(
    ("name", "codec"),
    [("windows-31j", "cp932"), ("MS932", "cp932"), ("windows-936", "gbk"),
     ("x-EUC-CN", "gb2312"), ("x-windows-949", "cp949"), ("8859_1", "iso8859-1"),
     ("ISO8859_15", "iso8859-15"), ("IBM01140", "cp1140"), ("IBM037", "cp037"),
     ("UnicodeLittle", "utf-16"), ("UnicodeBigUnmarked", "utf-16-be"),
     ("x-UTF-16LE-BOM", "utf-16"), ("Big5-HKSCS", "big5hkscs")],
)  # fmt: skip
def test_java_names_python_spells_otherwise(name: str, codec: str) -> None:
    assert codecs.lookup(check_charset(name)).name == codecs.lookup(codec).name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("nonexistent", "unknown charset"),
        ("", "unknown charset"),
        ("a\x00b", "unknown charset"),
        ("CESU-8", "unknown charset"),
        ("hex", "not a charset"),
        ("base64", "not a charset"),
        ("zlib", "not a charset"),
        ("rot13", "not a charset"),
        ("idna", "cannot print arbitrary bytes"),
        ("punycode", "cannot print arbitrary bytes"),
        ("undefined", "cannot print arbitrary bytes"),
    ],
)
def test_codecs_that_cannot_print_a_body_are_refused(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_charset(name)


@given(st.binary(max_size=200), st.sampled_from(PRINTABLE))
def test_a_taken_charset_decodes_any_body(body: bytes, name: str) -> None:
    assert isinstance(body.decode(check_charset(name), errors="replace"), str)
