"""Dates: parsing benchmark timestamps, normalising relative time expressions.

Turn time is not event time: "last Saturday" said on 2023-05-08 refers to 2023-05-06.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_MONTHS = {name.lower(): number for number, name in enumerate(MONTH_NAMES, start=1)}
_MONTHS.update({name[:3]: num for name, num in list(_MONTHS.items())})
_MONTHS["sept"] = 9


def month_number(name: str) -> int | None:
    """ "May" / "may" / "Sept" -> 5 / 5 / 9; None for anything else."""
    return _MONTHS.get(name.strip().lower().rstrip("."))


# "1:56 pm on 8 May, 2023" (LoCoMo)
_LOCOMO = re.compile(
    r"^\s*(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ampm>[ap]\.?m\.?)\s+on\s+(?P<d>\d{1,2})\s+"
    r"(?P<mon>[A-Za-z]+)\.?,?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
# "2023/05/30 (Tue) 23:40" (LongMemEval)
_LME = re.compile(
    r"^\s*(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})\s*(?:\([A-Za-z]+\))?\s*"
    r"(?:(?P<h>\d{1,2}):(?P<m>\d{2}))?\s*$"
)


def parse_timestamp(raw: str | None) -> datetime | None:
    """Parse the timestamp formats of LoCoMo, LongMemEval and ISO 8601; None if unparseable."""
    if raw is None:
        return None
    text = str(raw).strip()
    if not text:
        return None
    if match := _LOCOMO.match(text):
        month = _MONTHS.get(match["mon"].lower())
        if month is None:
            return None
        hour = int(match["h"]) % 12 + (12 if match["ampm"].lower().startswith("p") else 0)
        return _safe_datetime(int(match["y"]), month, int(match["d"]), hour, int(match["m"]))
    if match := _LME.match(text):
        return _safe_datetime(
            int(match["y"]),
            int(match["mo"]),
            int(match["d"]),
            int(match["h"] or 0),
            int(match["m"] or 0),
        )
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def to_iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="minutes") if moment else None


def _safe_datetime(year: int, month: int, day: int, hour: int, minute: int) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Relative time expressions
#
# Each expression is resolved against the turn's timestamp (the *anchor*) and the resolution is
# appended in parentheses right after the original wording, which is kept: the original words
# help lexical retrieval, the resolution lets a reader (or a verifier) compute with real dates.
# Conventions (English has no single answer; these are the common readings, written down):
#   last/this past <weekday>   the most recent such day strictly before the anchor
#   on <weekday>               same (past-leaning) unless the clause speaks of the future
#   this <weekday>             the upcoming such day, the anchor itself if it is that day
#   next/this coming <weekday> the next such day strictly after the anchor
#   weeks run Monday..Sunday; a weekend is named by its Saturday
#   "a couple of" = 2, "a few" = 3, "several" = 4, marked "around"
#   seasons are meteorological, northern hemisphere: spring = Mar-May, summer = Jun-Aug,
#   fall = Sep-Nov, winter = Dec-Feb (named by the year of its December)
# --------------------------------------------------------------------------------------------

TimeKind = Literal["date", "interval", "vague"]

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_SEASON_MONTHS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11)}
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
}
_APPROXIMATE_WORDS = {"a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4}


@dataclass(frozen=True)
class TimeMention:
    """One relative expression found in a text and what it resolves to.

    ``resolved`` is the human-readable resolution that was appended ("2023-05-06",
    "the week of 2023-04-24", "April 2023", "shortly before 2023-05-08"); ``start``/``end``
    are the ISO dates of the span it denotes (equal for a single day), for computing.
    """

    original: str
    resolved: str
    kind: TimeKind
    start: str | None = None
    end: str | None = None


# ---- small calendar helpers ----------------------------------------------------------------


def weekday_index(name: str) -> int:
    """'Saturday', 'sat', 'Tues' -> 0-based weekday (Monday = 0); ValueError if not a weekday."""
    key = name.strip().lower().rstrip(".")
    for index, day in enumerate(WEEKDAYS):
        if key == day or (len(key) >= 3 and day.startswith(key)):
            return index
    raise ValueError(f"not a weekday: {name!r}")


def resolve_weekday(anchor: date, weekday: int | str, direction: str) -> date:
    """The date a weekday reference points to, seen from ``anchor``.

    direction: "last" (strictly before), "next" (strictly after), "this" (upcoming, or the
    anchor itself when it is that weekday).
    """
    target = weekday_index(weekday) if isinstance(weekday, str) else weekday
    if direction == "last":
        return anchor - timedelta(days=(anchor.weekday() - target) % 7 or 7)
    if direction == "next":
        return anchor + timedelta(days=(target - anchor.weekday()) % 7 or 7)
    if direction == "this":
        return anchor + timedelta(days=(target - anchor.weekday()) % 7)
    raise ValueError(f"unknown weekday direction: {direction!r}")


def week_start(day: date) -> date:
    """The Monday of the week that contains ``day``."""
    return day - timedelta(days=day.weekday())


def weekend_saturday(anchor: date, weeks_from_this: int = 0) -> date:
    """Saturday of "this weekend" (the one of the anchor's Monday..Sunday week), shifted."""
    return week_start(anchor) + timedelta(days=5 + 7 * weeks_from_this)


def shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    """(year, month) moved by ``delta`` months."""
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def month_label(year: int, month: int) -> str:
    return f"{_MONTH_NAMES[month - 1]} {year}"


def month_span(year: int, month: int) -> tuple[date, date]:
    next_year, next_month = shift_month(year, month, 1)
    return date(year, month, 1), date(next_year, next_month, 1) - timedelta(days=1)


def season_span(season: str, year: int) -> tuple[date, date]:
    """First and last day of a season; winter ``year`` runs from December ``year``."""
    if season == "winter":
        end_year, end_month = year + 1, 2
        return date(year, 12, 1), month_span(end_year, end_month)[1]
    first, last = _SEASON_MONTHS[season]
    return date(year, first, 1), month_span(year, last)[1]


def season_label(season: str, year: int) -> str:
    name = "fall" if season == "autumn" else season
    if season == "winter":
        return f"winter {year}-{(year + 1) % 100:02d}"
    return f"{name} {year}"


def resolve_season(anchor: date, season: str, direction: str) -> int:
    """The (starting) year of the season instance that "last/this/next <season>" means."""
    candidates = range(anchor.year - 2, anchor.year + 2)
    spans = {year: season_span(season, year) for year in candidates}
    if direction == "last":
        return max(year for year, (_, end) in spans.items() if end < anchor)
    this_year = _this_season_year(anchor, spans)
    if direction == "this":
        return this_year
    if direction == "next":
        return this_year + 1
    raise ValueError(f"unknown season direction: {direction!r}")


def _this_season_year(anchor: date, spans: dict[int, tuple[date, date]]) -> int:
    for year, (start, end) in spans.items():
        if start <= anchor <= end:
            return year
    # Not in that season now: the one of this calendar year (for winter, the coming one).
    return anchor.year


def parse_count(word: str) -> tuple[int, bool] | None:
    """'3', 'two', 'a couple of', 'a few' -> (number, approximate); None if not a count."""
    key = " ".join(word.lower().split())
    if key.isdigit():
        return int(key), False
    if key in _NUMBER_WORDS:
        return _NUMBER_WORDS[key], False
    if key in _APPROXIMATE_WORDS:
        return _APPROXIMATE_WORDS[key], True
    return None


# ---- the normaliser ------------------------------------------------------------------------

_WEEKDAY_RE = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|(?-i:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\b\.?)"
)
_MONTH_RE = "(?-i:" + "|".join(_MONTH_NAMES) + ")"
_COUNT_RE = (
    r"(?:\d{1,3}|a\s+couple\s+of|couple\s+of|a\s+few|few|several|an|a|"
    + "|".join(sorted((w for w in _NUMBER_WORDS if len(w) > 2), key=len, reverse=True))
    + ")"
)
_POSSESSIVE = r"(?:['’]s)?"
_FUTURE_CUES = re.compile(
    r"\b(?:will|shall|going\s+to|gonna|plan|plans|planning|planned\s+to|hope\s+to|hoping\s+to|"
    r"want\s+to|can['’]?t\s+wait|looking\s+forward|next|tomorrow|upcoming)\b|['’]ll\b",
    re.IGNORECASE,
)


def _pattern(body: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?:{body})(?![\w-])", re.IGNORECASE)


_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "day_offset",
        _pattern(r"(?P<dayrel>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow)"),
    ),
    ("day_offset", _pattern(rf"(?P<dayrel>yesterday|tomorrow|today|tonight){_POSSESSIVE}")),
    ("day_offset", _pattern(r"(?P<dayrel>last\s+night|this\s+(?:morning|afternoon|evening))")),
    (
        "weekday",
        _pattern(
            rf"(?P<dir>last|this\s+past|this\s+coming|coming|this|next|on)\s+(?P<wd>{_WEEKDAY_RE})"
        ),
    ),
    ("unit_before_last", _pattern(r"the\s+(?P<unit>weekend|week|month|year)\s+before\s+last")),
    (
        "unit",
        _pattern(
            r"(?P<dir>last|this\s+past|this\s+coming|this|next)\s+(?P<unit>weekend|week|month|year)"
        ),
    ),
    (
        "season",
        _pattern(
            r"(?P<dir>last|this\s+past|this\s+coming|this|next)\s+(?P<season>spring|summer|fall|autumn|winter)"
        ),
    ),
    (
        "month",
        _pattern(rf"(?P<dir>last|this\s+past|this\s+coming|this|next)\s+(?P<month>{_MONTH_RE})"),
    ),
    (
        "ago",
        _pattern(
            rf"(?P<count>{_COUNT_RE})\s+(?P<unit>day|weekend|week|month|year)s?\s+(?:ago|back)"
        ),
    ),
    (
        "ahead",
        _pattern(
            rf"in\s+(?P<count>{_COUNT_RE})\s+(?P<unit>day|week|month|year)s?(?:['’]s?\s+time)?"
        ),
    ),
    (
        "vague",
        _pattern(
            r"(?P<vague>recently|lately|the\s+other\s+day|not\s+long\s+ago|a\s+while\s+(?:ago|back)"
            r"|some\s+time\s+ago|a\s+long\s+time\s+ago)"
        ),
    ),
]


def normalise_relative_times(
    text: str, anchor: datetime | date | None
) -> tuple[str, list[TimeMention]]:
    """Append the resolution of each relative time expression in ``text``, seen from ``anchor``.

    "I went hiking last Saturday" @ 2023-05-08 -> "I went hiking last Saturday (2023-05-06)".
    The original wording is kept. Expressions already followed by a parenthesis are left alone,
    so the function is idempotent. Without an anchor the text is returned unchanged.
    """
    if anchor is None or not text:
        return text, []
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    found: list[tuple[int, int, TimeMention]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _RULES:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue  # an earlier, more specific rule already covers these words
            if _already_resolved(text, end):
                continue
            mention = _resolve(kind, match, day, text)
            if mention is None:
                continue
            taken.append((start, end))
            found.append((start, end, mention))
    found.sort(key=lambda item: item[0])
    pieces: list[str] = []
    cursor = 0
    for _start, end, mention in found:
        pieces.append(text[cursor:end])
        pieces.append(f" ({mention.resolved})")
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces), [mention for _, _, mention in found]


def _already_resolved(text: str, end: int) -> bool:
    rest = text[end:].lstrip()
    return rest.startswith(("(", ")"))


def _resolve(kind: str, match: re.Match[str], day: date, text: str) -> TimeMention | None:
    original = match.group(0)
    resolver = _RESOLVERS[kind]
    result = resolver(match, day, text)
    if result is None:
        return None
    resolved, mention_kind, start, end = result
    return TimeMention(original, resolved, mention_kind, start.isoformat(), end.isoformat())


_Resolution = tuple[str, TimeKind, date, date] | None


def _single_day(target: date, approximate: bool = False) -> _Resolution:
    label = f"around {target.isoformat()}" if approximate else target.isoformat()
    return label, "date", target, target


def _week(monday: date, approximate: bool = False) -> _Resolution:
    prefix = "around " if approximate else ""
    return f"{prefix}the week of {monday.isoformat()}", "interval", monday, monday + timedelta(6)


def _weekend(saturday: date, approximate: bool = False) -> _Resolution:
    prefix = "around " if approximate else ""
    return (
        f"{prefix}the weekend of {saturday.isoformat()}",
        "interval",
        saturday,
        saturday + timedelta(1),
    )


def _month(year: int, month: int, approximate: bool = False) -> _Resolution:
    prefix = "around " if approximate else ""
    first, last = month_span(year, month)
    return f"{prefix}{month_label(year, month)}", "interval", first, last


def _year(year: int, approximate: bool = False) -> _Resolution:
    prefix = "around " if approximate else ""
    return f"{prefix}{year}", "interval", date(year, 1, 1), date(year, 12, 31)


def _direction(raw: str) -> str:
    key = " ".join(raw.lower().split())
    if key in ("last", "this past"):
        return "last"
    if key in ("next", "this coming", "coming"):
        return "next"
    return key  # "this" or "on"


def _resolve_day_offset(match: re.Match[str], day: date, text: str) -> _Resolution:
    key = " ".join(match["dayrel"].lower().split())
    offsets = {
        "the day before yesterday": -2,
        "yesterday": -1,
        "last night": -1,
        "today": 0,
        "tonight": 0,
        "this morning": 0,
        "this afternoon": 0,
        "this evening": 0,
        "tomorrow": 1,
        "the day after tomorrow": 2,
    }
    return _single_day(day + timedelta(days=offsets[key]))


def _resolve_weekday(match: re.Match[str], day: date, text: str) -> _Resolution:
    direction = _direction(match["dir"])
    if direction == "on":
        sentence = _sentence_around(text, match.start(), match.end())
        direction = "next" if _FUTURE_CUES.search(sentence) else "last"
    return _single_day(resolve_weekday(day, match["wd"], direction))


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence holding text[start:end], by the nearest terminators either side."""
    left = max(text.rfind(mark, 0, start) for mark in ".!?\n") + 1
    rights = [pos for mark in ".!?\n" if (pos := text.find(mark, end)) >= 0]
    return text[left : min(rights, default=len(text))]


def _resolve_unit(match: re.Match[str], day: date, text: str) -> _Resolution:
    step = {"last": -1, "this": 0, "next": 1}[_direction(match["dir"])]
    return _unit_shift(match["unit"].lower(), step, day, approximate=False)


def _resolve_unit_before_last(match: re.Match[str], day: date, text: str) -> _Resolution:
    return _unit_shift(match["unit"].lower(), -2, day, approximate=False)


def _unit_shift(unit: str, step: int, day: date, approximate: bool) -> _Resolution:
    if unit == "day":
        return _single_day(day + timedelta(days=step), approximate)
    if unit == "week":
        return _week(week_start(day) + timedelta(weeks=step), approximate)
    if unit == "weekend":
        return _weekend(weekend_saturday(day, step), approximate)
    if unit == "month":
        return _month(*shift_month(day.year, day.month, step), approximate)
    return _year(day.year + step, approximate)


def _resolve_count(match: re.Match[str], day: date, sign: int) -> _Resolution:
    parsed = parse_count(match["count"])
    if parsed is None:
        return None
    count, approximate = parsed
    unit = match["unit"].lower()
    if unit == "week":  # "two weeks ago" names a week, not a day
        return _week(week_start(day + timedelta(weeks=sign * count)), approximate)
    return _unit_shift(unit, sign * count, day, approximate)


def _resolve_ago(match: re.Match[str], day: date, text: str) -> _Resolution:
    return _resolve_count(match, day, -1)


def _resolve_ahead(match: re.Match[str], day: date, text: str) -> _Resolution:
    return _resolve_count(match, day, +1)


def _resolve_season(match: re.Match[str], day: date, text: str) -> _Resolution:
    season = match["season"].lower()
    year = resolve_season(day, season, _direction(match["dir"]))
    first, last = season_span(season, year)
    return season_label(season, year), "interval", first, last


def _resolve_month(match: re.Match[str], day: date, text: str) -> _Resolution:
    month = _MONTH_NAMES.index(match["month"]) + 1
    direction = _direction(match["dir"])
    if direction == "last":
        year = day.year if month < day.month else day.year - 1
    elif direction == "next":
        year = day.year if month > day.month else day.year + 1
    else:
        year = day.year
    return _month(year, month)


# How far back a vague expression reaches: a judgement call, kept explicit.
_VAGUE_WINDOWS = {
    "recently": ("shortly before", 30, 0),
    "lately": ("shortly before", 30, 0),
    "not long ago": ("shortly before", 30, 0),
    "the other day": ("shortly before", 10, 1),
    "a while ago": ("some time before", 365, 14),
    "a while back": ("some time before", 365, 14),
    "some time ago": ("some time before", 365, 14),
    "a long time ago": ("long before", 3650, 365),
}


def _resolve_vague(match: re.Match[str], day: date, text: str) -> _Resolution:
    key = " ".join(match["vague"].lower().split())
    phrase, days_back_start, days_back_end = _VAGUE_WINDOWS[key]
    return (
        f"{phrase} {day.isoformat()}",
        "vague",
        day - timedelta(days=days_back_start),
        day - timedelta(days=days_back_end),
    )


_RESOLVERS = {
    "day_offset": _resolve_day_offset,
    "weekday": _resolve_weekday,
    "unit": _resolve_unit,
    "unit_before_last": _resolve_unit_before_last,
    "season": _resolve_season,
    "month": _resolve_month,
    "ago": _resolve_ago,
    "ahead": _resolve_ahead,
    "vague": _resolve_vague,
}
