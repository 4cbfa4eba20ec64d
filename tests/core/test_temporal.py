"""Relative time normalisation. Expected dates were read off a calendar (python's calendar
module), not computed with the code under test:

         May 2023                April 2023
    Mo Tu We Th Fr Sa Su    Mo Tu We Th Fr Sa Su
     1  2  3  4  5  6  7                    1  2
     8  9 10 11 12 13 14     3  4  5  6  7  8  9
    15 16 17 18 19 20 21    10 11 12 13 14 15 16
    22 23 24 25 26 27 28    17 18 19 20 21 22 23
    29 30 31                24 25 26 27 28 29 30
"""

from datetime import date, datetime

import pytest

from mera_pipelines.core.temporal import (
    TimeMention,
    normalise_relative_times,
    parse_count,
    parse_timestamp,
    resolve_season,
    resolve_weekday,
    shift_month,
    to_iso,
    week_start,
    weekday_index,
)

MONDAY = datetime(2023, 5, 8, 13, 56)  # LoCoMo conv-26 session 1: "1:56 pm on 8 May, 2023"


def resolved(text: str, anchor: datetime | date = MONDAY) -> str:
    return normalise_relative_times(text, anchor)[0]


# ---- the existing parsing API keeps its behaviour ---------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("2023/05/30 (Tue) 23:40", datetime(2023, 5, 30, 23, 40)),
        ("2023-05-08T13:56", datetime(2023, 5, 8, 13, 56)),
        ("not a date", None),
        (None, None),
    ],
)
def test_parse_timestamp_formats(raw, expected):
    assert parse_timestamp(raw) == expected


def test_to_iso_minutes():
    assert to_iso(MONDAY) == "2023-05-08T13:56"
    assert to_iso(None) is None


# ---- the examples of the brief, in full ------------------------------------------------------


def test_last_saturday_keeps_wording_and_appends_date():
    text, mentions = normalise_relative_times("I went hiking last Saturday", MONDAY)
    assert text == "I went hiking last Saturday (2023-05-06)"
    assert mentions == [
        TimeMention("last Saturday", "2023-05-06", "date", "2023-05-06", "2023-05-06")
    ]


def test_weeks_ago_names_the_week():
    text, mentions = normalise_relative_times("We met two weeks ago at the gym.", MONDAY)
    assert text == "We met two weeks ago (the week of 2023-04-24) at the gym."
    assert mentions[0].kind == "interval"
    assert (mentions[0].start, mentions[0].end) == ("2023-04-24", "2023-04-30")


def test_last_month_and_last_year():
    assert resolved("It rained a lot last month.") == "It rained a lot last month (April 2023)."
    assert resolved("I moved last year") == "I moved last year (2022)"


def test_vague_expression_is_anchored_before_the_turn():
    text, mentions = normalise_relative_times("I recently started pottery", MONDAY)
    assert text == "I recently (shortly before 2023-05-08) started pottery"
    assert mentions[0].kind == "vague"
    assert mentions[0].end == "2023-05-08"
    assert mentions[0].start < "2023-05-08"


# ---- days ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("today", "2023-05-08"),
        ("tonight", "2023-05-08"),
        ("this morning", "2023-05-08"),
        ("yesterday", "2023-05-07"),
        ("last night", "2023-05-07"),
        ("the day before yesterday", "2023-05-06"),
        ("tomorrow", "2023-05-09"),
        ("the day after tomorrow", "2023-05-10"),
    ],
)
def test_day_words(phrase, expected):
    assert resolved(f"It happened {phrase}.") == f"It happened {phrase} ({expected})."


def test_day_words_are_case_insensitive_and_possessive_kept_whole():
    assert resolved("Yesterday was fun") == "Yesterday (2023-05-07) was fun"
    assert resolved("yesterday's game") == "yesterday's (2023-05-07) game"


def test_day_before_yesterday_wins_over_yesterday():
    _, mentions = normalise_relative_times("the day before yesterday", MONDAY)
    assert [m.original for m in mentions] == ["the day before yesterday"]


def test_year_and_leap_day_boundaries():
    assert resolved("yesterday", datetime(2023, 1, 1)) == "yesterday (2022-12-31)"
    assert resolved("yesterday", datetime(2024, 3, 1)) == "yesterday (2024-02-29)"
    assert resolved("last month", datetime(2023, 1, 2)) == "last month (December 2022)"
    assert resolved("last week", datetime(2023, 1, 2)) == "last week (the week of 2022-12-26)"
    assert resolved("last Saturday", datetime(2023, 1, 2)) == "last Saturday (2022-12-31)"


# ---- weekdays ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("last Saturday", "2023-05-06"),
        ("last Sunday", "2023-05-07"),
        ("last Monday", "2023-05-01"),  # said on a Monday: a week back, not today
        ("this past Friday", "2023-05-05"),
        ("last Fri", "2023-05-05"),
        ("last Tues", "2023-05-02"),
        ("this Friday", "2023-05-12"),
        ("this Monday", "2023-05-08"),
        ("next Friday", "2023-05-12"),
        ("next Monday", "2023-05-15"),
        ("this coming Sunday", "2023-05-14"),
    ],
)
def test_weekday_references(phrase, expected):
    assert resolved(phrase) == f"{phrase} ({expected})"


def test_on_weekday_is_past_leaning_unless_the_sentence_speaks_of_the_future():
    assert resolved("I saw it on Friday.") == "I saw it on Friday (2023-05-05)."
    assert resolved("On Friday I will see it.") == "On Friday (2023-05-12) I will see it."
    # the future cue of another sentence does not count
    assert resolved("I saw it on Friday. I'll go again.") == (
        "I saw it on Friday (2023-05-05). I'll go again."
    )


def test_weekday_words_inside_other_words_are_not_matched():
    assert resolved("I last sat on the Sunday-school bench") == (
        "I last sat on the Sunday-school bench"
    )
    assert resolved("Sundays are quiet") == "Sundays are quiet"


def test_resolve_weekday_helper():
    assert resolve_weekday(date(2023, 5, 8), "Saturday", "last") == date(2023, 5, 6)
    assert resolve_weekday(date(2023, 5, 8), 0, "last") == date(2023, 5, 1)
    assert resolve_weekday(date(2023, 5, 8), 0, "this") == date(2023, 5, 8)
    assert resolve_weekday(date(2023, 5, 8), "mon", "next") == date(2023, 5, 15)
    with pytest.raises(ValueError):
        resolve_weekday(date(2023, 5, 8), "Saturday", "sideways")
    with pytest.raises(ValueError):
        weekday_index("Caturday")


# ---- weeks, weekends, months, years, seasons --------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("last week", "the week of 2023-05-01"),
        ("this week", "the week of 2023-05-08"),
        ("next week", "the week of 2023-05-15"),
        ("the week before last", "the week of 2023-04-24"),
        ("last weekend", "the weekend of 2023-05-06"),
        ("this past weekend", "the weekend of 2023-05-06"),
        ("this weekend", "the weekend of 2023-05-13"),
        ("next weekend", "the weekend of 2023-05-20"),
        ("this month", "May 2023"),
        ("next month", "June 2023"),
        ("the month before last", "March 2023"),
        ("this year", "2023"),
        ("next year", "2024"),
        ("last summer", "summer 2022"),
        ("this summer", "summer 2023"),
        ("last winter", "winter 2022-23"),
        ("last spring", "spring 2022"),  # spring 2023 (Mar-May) is not over on 8 May
        ("last fall", "fall 2022"),
        ("last May", "May 2022"),
        ("last April", "April 2023"),
        ("next June", "June 2023"),
    ],
)
def test_calendar_units(phrase, expected):
    assert resolved(phrase) == f"{phrase} ({expected})"


def test_weekend_seen_from_a_sunday():
    sunday = datetime(2023, 5, 7, 10, 0)
    assert resolved("last weekend", sunday) == "last weekend (the weekend of 2023-04-29)"
    assert resolved("this weekend", sunday) == "this weekend (the weekend of 2023-05-06)"


def test_week_interval_bounds():
    _, [mention] = normalise_relative_times("last week", MONDAY)
    assert (mention.start, mention.end, mention.kind) == ("2023-05-01", "2023-05-07", "interval")
    _, [month] = normalise_relative_times("last month", MONDAY)
    assert (month.start, month.end) == ("2023-04-01", "2023-04-30")


def test_lowercase_month_name_is_not_a_time():
    assert resolved("We may meet, last may be best") == "We may meet, last may be best"


# ---- counts: "N units ago", "in N units" --------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("3 days ago", "2023-05-05"),
        ("three days ago", "2023-05-05"),
        ("a day ago", "2023-05-07"),
        ("a week ago", "the week of 2023-05-01"),
        ("2 weeks ago", "the week of 2023-04-24"),
        ("two weekends ago", "the weekend of 2023-04-29"),
        ("a month ago", "April 2023"),
        ("six months ago", "November 2022"),
        ("a year ago", "2022"),
        ("five years ago", "2018"),
        ("ten years back", "2013"),
        ("a couple of days ago", "around 2023-05-06"),
        ("a few weeks ago", "around the week of 2023-04-17"),
        ("a few years ago", "around 2020"),
        ("several months ago", "around January 2023"),
        ("in 3 days", "2023-05-11"),
        ("in a day", "2023-05-09"),
        ("in two weeks", "the week of 2023-05-22"),
        ("in a month", "June 2023"),
        ("in two years", "2025"),
        ("in a week's time", "the week of 2023-05-15"),
    ],
)
def test_counted_offsets(phrase, expected):
    assert resolved(phrase) == f"{phrase} ({expected})"


def test_every_two_weeks_is_not_a_date():
    assert resolved("we play every two weeks") == "we play every two weeks"


def test_parse_count():
    assert parse_count("12") == (12, False)
    assert parse_count("Two") == (2, False)
    assert parse_count("a  couple of") == (2, True)
    assert parse_count("a few") == (3, True)
    assert parse_count("many") is None


# ---- vague ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("recently", "shortly before 2023-05-08"),
        ("lately", "shortly before 2023-05-08"),
        ("the other day", "shortly before 2023-05-08"),
        ("a while ago", "some time before 2023-05-08"),
        ("a while back", "some time before 2023-05-08"),
    ],
)
def test_vague_phrases(phrase, expected):
    text, [mention] = normalise_relative_times(f"It happened {phrase}.", MONDAY)
    assert text == f"It happened {phrase} ({expected})."
    assert mention.kind == "vague"
    assert mention.end <= "2023-05-08"


# ---- whole texts --------------------------------------------------------------------------


def test_several_expressions_in_one_text_in_order():
    text, mentions = normalise_relative_times(
        "Yesterday I ran; last week I swam, and next month I fly.", MONDAY
    )
    assert text == (
        "Yesterday (2023-05-07) I ran; last week (the week of 2023-05-01) I swam, "
        "and next month (June 2023) I fly."
    )
    assert [m.original for m in mentions] == ["Yesterday", "last week", "next month"]


def test_idempotent_and_respects_existing_resolutions():
    once = resolved("I went hiking last Saturday and recently again")
    assert resolved(once) == once
    # a model that already resolved the expression is left alone
    assert resolved("last Saturday (May 6) was fun") == "last Saturday (May 6) was fun"


def test_without_anchor_text_is_unchanged():
    assert normalise_relative_times("I went hiking last Saturday", None) == (
        "I went hiking last Saturday",
        [],
    )


def test_anchor_can_be_a_date():
    assert resolved("yesterday", date(2023, 5, 8)) == "yesterday (2023-05-07)"


def test_text_without_expressions_is_unchanged():
    text = "I love painting sunsets; my favourite is from Lake Tahoe."
    assert normalise_relative_times(text, MONDAY) == (text, [])


# ---- helpers ------------------------------------------------------------------------------


def test_calendar_helpers():
    assert week_start(date(2023, 5, 14)) == date(2023, 5, 8)
    assert shift_month(2023, 1, -1) == (2022, 12)
    assert shift_month(2023, 11, 3) == (2024, 2)
    assert resolve_season(date(2023, 5, 8), "summer", "last") == 2022
    assert resolve_season(date(2023, 9, 10), "summer", "last") == 2023
    assert resolve_season(date(2023, 1, 10), "winter", "this") == 2022
    assert resolve_season(date(2023, 10, 10), "winter", "this") == 2023
