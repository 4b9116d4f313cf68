"""Subscription expressions: ``*`` and ``TagA || TagB``; tagsCode matched as a Java int."""

from __future__ import annotations

import pytest

from rocketstore.errors import ConfigError, SelectorError
from rocketstore.format.javahash import java_string_hash, tags_code
from rocketstore.format.subscription import SUB_ALL, build_subscription, parse_subscription


@pytest.mark.parametrize("expression", [None, "", "*"])
def test_match_all_expressions(expression: str | None) -> None:
    sub = parse_subscription(expression)
    assert sub.matches_all
    assert sub.expression == SUB_ALL == "*"
    assert sub.tags == frozenset()
    assert sub.codes == frozenset()
    assert sub.match_code(12345)
    assert sub.match_code(-(2**63))
    assert sub.match_tags(None)
    assert sub.match_tags("anything")


@pytest.mark.parametrize("expression", ["  ", " || || ", "\t"])
def test_blank_tags_match_nothing(expression: str) -> None:
    # FilterAPI keeps the expression with no tag code: a broker's unit check then fails
    # for every tagsCode, and the record check for every TAGS.
    sub = parse_subscription(expression)
    assert not sub.matches_all and sub.matches_none
    assert sub.expression == expression and sub.tags == frozenset()
    assert not sub.match_code(0) and not sub.match_code(12345)
    assert not sub.match_tags(None) and not sub.match_tags("anything")
    assert not sub.match_properties({"TAGS": "a"})


@pytest.mark.parametrize("expression", ["||", "||||", "||||||"])
def test_an_expression_split_into_nothing_is_refused(expression: str) -> None:
    # Java's split drops trailing empty strings: "||" leaves no part at all.
    with pytest.raises(ConfigError, match="names no tag"):
        parse_subscription(expression)


def test_star_with_spaces_is_a_tag_named_star() -> None:
    # Only the exact "*" is every tag: " * " is split like any other expression.
    sub = parse_subscription(" * ")
    assert sub.tags == frozenset({"*"}) and not sub.matches_all
    assert sub.match_tags("*") and not sub.match_tags("TagA")


def test_two_tags() -> None:
    sub = parse_subscription("TagA || TagB")
    assert not sub.matches_all
    assert sub.expression == "TagA || TagB"
    assert sub.tags == frozenset({"TagA", "TagB"})
    assert sub.codes == frozenset({2_598_919, 2_598_920})  # "TagA", "TagB" hashCodes


def test_tags_are_trimmed_and_empty_ones_dropped() -> None:
    sub = parse_subscription("  TagA||  TagB  ||||")
    assert sub.tags == frozenset({"TagA", "TagB"})


def test_single_tag() -> None:
    sub = parse_subscription("TAG1")
    assert sub.tags == frozenset({"TAG1"})
    assert sub.codes == frozenset({2_567_159})


def test_match_code() -> None:
    sub = parse_subscription("TagA || TagB")
    assert sub.match_code(tags_code("TagA"))
    assert sub.match_code(tags_code("TagB"))
    assert not sub.match_code(tags_code("TagC"))
    assert not sub.match_code(0)


def test_match_code_negative_hash_sign_extended() -> None:
    sub = parse_subscription("AaTopic#BB")
    assert sub.codes == frozenset({-10_606_476})
    assert sub.match_code(-10_606_476)  # as stored in the CQ (sign-extended long)
    assert sub.match_code(0xFFFFFFFFFF5E2874 - 2**64)


def test_match_code_uses_the_low_32_bits_like_long_int_value() -> None:
    # ConsumeQueue tagsCode is a long; the filter compares tagsCode.intValue().
    sub = parse_subscription("TagA")
    assert sub.match_code(2_598_919 + 2**32)
    assert sub.match_code(2_598_919 - 2**40)
    sub_neg = parse_subscription("AaTopic#BB")
    assert sub_neg.match_code((-10_606_476) & 0xFFFFFFFF)  # zero-extended form


def test_hash_collisions_match_by_code_but_not_by_tags() -> None:
    # "Aa" and "BB" share a hashCode: the queue filter lets both through, the tag check not.
    sub = parse_subscription("Aa")
    assert java_string_hash("Aa") == java_string_hash("BB")
    assert sub.match_code(tags_code("BB"))
    assert sub.match_tags("Aa")
    assert not sub.match_tags("BB")


def test_match_tags() -> None:
    sub = parse_subscription("TagA || TagB")
    assert sub.match_tags("TagA")
    assert sub.match_tags("TagB")
    assert not sub.match_tags(None)
    assert not sub.match_tags("")
    assert not sub.match_tags("TagA || TagB")
    assert not sub.match_tags("taga")


def test_an_extension_address_defers_to_the_records_tag() -> None:
    """A broker with enableConsumeQueueExt keeps an address in the tagsCode field: it says
    nothing of the tag, so it passes the code check and the record's TAGS decide."""
    sub = parse_subscription("TagA")
    assert sub.match_code(-(2**63) + 40)
    assert sub.match_code(-(2**31) - 1)
    assert not sub.match_code(-(2**31))  # a tag hash (a Java int), not TagA's
    assert not sub.match_tags("TagB")


def test_build_subscription_tag_or_sql92() -> None:
    tags = build_subscription("TagA || TagB", None)
    assert tags == parse_subscription("TagA || TagB") and tags.expression_type == "TAG"
    assert tags.match_properties({"TAGS": "TagB"}) and not tags.match_properties({})
    sql = build_subscription("a > 5", "SQL92")
    assert sql.expression_type == "SQL92" and not sql.matches_all
    assert sql.match_code(12345)  # no bitmap: every unit goes on to the record
    assert sql.match_properties({"a": "6"}) and not sql.match_properties({"a": "5"})
    assert build_subscription("a > 5", " sql92 ") is sql  # cached
    with pytest.raises(SelectorError, match="needs an expression"):
        build_subscription("  ", "SQL92")
    with pytest.raises(SelectorError):
        build_subscription("a >", "SQL92")
    with pytest.raises(ConfigError, match="TAG or SQL92"):
        build_subscription("x", "CLASS")
