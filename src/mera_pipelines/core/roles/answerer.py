"""The answer model: question + final evidence graph + accepted fact records -> a short answer.

Two implementations behind one interface (``Answerer``):

- ``HeuristicAnswerer``: extractive and deterministic (offline default). It picks the evidence
  fact that best covers the question's content words, then cuts the answer out of it by
  question form (a date for "when", a number for "how many", a name for "who", the words of
  the fact the question does not already contain otherwise). When no fact covers the question,
  or the question is about a person the evidence never mentions, it answers
  "Not mentioned in the conversation."
- ``LLMAnswerer``: a chat model (any ``LLMBackend``) answers from the graph and the evidence
  records, with their turn ids and dates, fenced as data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol

from mera_pipelines.core.errors import ConfigError, MeraError
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.memory import TurnCandidate
from mera_pipelines.core.metrics import porter_stem
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.common import (
    build_role,
    call_options,
    fence_data,
    load_prompt,
    render_messages,
    spent_tokens,
)
from mera_pipelines.core.temporal import (
    MONTH_NAMES,
    WEEKDAYS,
    TimeMention,
    normalise_relative_times,
    parse_count,
    parse_timestamp,
)
from mera_pipelines.core.text import (
    SMALL_TALK_WORDS,
    STOPWORDS,
    normalise_apostrophes,
    proper_names,
    tokenize,
)

NOT_MENTIONED = "Not mentioned in the conversation."

# ---- the interface ---------------------------------------------------------------------------


@dataclass
class AnswerResult:
    answer: str
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None  # set when the answer could not be produced as asked


class Answerer(Protocol):
    name: str

    def answer(
        self,
        question: Question,
        graph_text: str,
        evidence: list[TurnCandidate],
        exhausted: bool,
    ) -> AnswerResult: ...


# ---- reading the question ----------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Words that frame a question rather than name what it is about.
_FRAME_WORDS = frozenset(
    _words(
        """kind type sort name names called happen happened ever usually typically think thinks
    feel feels like likely something anything specific particular"""
    )
)
# Light verbs say little about which fact is meant ("When did X go camping?" is about the
# camping): they count, but for less.
_LIGHT_VERBS = frozenset(
    _words(
        """go goes going went gone get gets getting got gotten make makes making made take
        takes taking took taken give gives giving gave given come comes coming came do done
        doing put see sees saw seen use used keep kept let say says said tell told"""
    )
)
_LIGHT_WEIGHT = 0.3
_YES_NO_OPENERS = frozenset(
    _words("is are was were do does did has have had can could would will should may might")
)
_WHEN_RE = re.compile(
    r"^\s*when\b|\b(?:what|which)\s+(?:date|day|year|month|time|week|weekend|season)\b"
    r"|\bin\s+what\s+(?:year|month)\b",
    re.IGNORECASE,
)


def question_form(question: str) -> str:
    """when | how_long_ago | how_long | how_many | who | where | why | yes_no | what."""
    text = normalise_apostrophes(question).strip().lower()
    if re.search(r"\bhow\s+long\s+ago\b|\bhow\s+many\s+\w+\s+ago\b", text):
        return "how_long_ago"
    if _WHEN_RE.search(text):
        return "when"
    if re.search(r"\bhow\s+long\b", text):
        return "how_long"
    if re.search(r"\bhow\s+(?:many|much|often)\b", text):
        return "how_many"
    first = text.split(maxsplit=1)[0] if text else ""
    if first in ("who", "whom", "whose") or re.search(r"\b(?:with|by|to|for)\s+whom?\b", text):
        return "who"
    if first == "where" or re.search(r"\bwhere\b", text):
        return "where"
    if first == "why" or re.search(r"\bwhy\b", text):
        return "why"
    if first in _YES_NO_OPENERS:
        return "yes_no"
    return "what"


@dataclass(frozen=True)
class QuestionView:
    """What the heuristic answerer reads from a question."""

    form: str
    terms: dict[str, float]  # stem -> weight
    name_stems: frozenset[str]
    words: frozenset[str]  # every lowercase token of the question, for span cutting
    is_list: bool = False  # asks for several things ("What activities ...?")
    # names the question is about, acronyms left out ("LGBTQ" is a topic, not an entity
    # whose absence from the evidence means the question cannot be answered)
    entity_stems: frozenset[str] = frozenset()


def read_question(text: str) -> QuestionView:
    names = {t for name in proper_names(text) for t in tokenize(name)}
    terms: dict[str, float] = {}
    for token in tokenize(text):
        if token in STOPWORDS or token in _FRAME_WORDS or (len(token) < 2 and not token.isdigit()):
            continue
        stem = porter_stem(token)
        # Names matter for who the question is about, but nearly every fact names a speaker,
        # so they tell facts apart less than the other words do.
        weight = 0.5 if token in names else _LIGHT_WEIGHT if token in _LIGHT_VERBS else 1.0
        terms[stem] = max(terms.get(stem, 0.0), weight)
    name_stems = frozenset(porter_stem(t) for t in names)
    words = frozenset(porter_stem(t) for t in tokenize(text))
    entities = frozenset(
        porter_stem(t) for name in proper_names(text) if not name.isupper() for t in tokenize(name)
    )
    return QuestionView(
        question_form(text), terms, name_stems, words, asks_for_list(text), entities
    )


_AUXILIARIES = frozenset(_words("do does did has have had is are was were can could will would"))
_HYPOTHETICAL_RE = re.compile(r"^\s*(?:would|could|might)\b|\blikely\b|\bprobably\b", re.I)


def asks_for_list(question: str) -> bool:
    """Whether a what/which question asks for several things: its head noun is plural
    ("What activities does ...", "What are X's pets' names?", "In what ways ...")."""
    tokens = normalise_apostrophes(question).lower().replace("?", " ").split()
    if "what" not in tokens and "which" not in tokens:
        return False
    start = tokens.index("what") if "what" in tokens else tokens.index("which")
    window: list[str] = []
    rest = tokens[start + 1 :]
    if rest and rest[0] in _AUXILIARIES:  # "what are X's names": the noun follows the verb
        window = rest[1:]
    else:
        for token in rest:
            if token in _AUXILIARIES:
                break
            window.append(token)
    return any(
        len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is", "'s")) for t in window
    )


def _same_name(a: str, b: str) -> bool:
    """ "mel" and "melanie" name the same person (a short form of at least three letters)."""
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


# ---- reading the evidence ----------------------------------------------------------------------

_SAID_PREFIX_RE = re.compile(r"^\s*[\w .'-]{1,40}?\s+(?:said|asked|says|asks|replied):\s*", re.I)
_RESOLUTION_RE = re.compile(r"\s*\(([^()]*\d{4}[^()]*)\)")
_ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTHS = list(MONTH_NAMES)
_MONTH_ALT = "|".join(_MONTHS)
_EXPLICIT_DATE_RE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_ALT}),?\s+(?P<y1>\d{{4}})"
    rf"|(?P<m2>{_MONTH_ALT})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})"
    rf"|(?P<m3>{_MONTH_ALT})\s+(?:of\s+)?(?P<y3>\d{{4}})"
    rf"|(?:in|since|during|of)\s+(?P<y4>(?:19|20)\d{{2}}))\b"
)


@dataclass
class _Fact:
    text: str  # without a "X said:" prefix
    raw: str
    candidate: TurnCandidate
    order: int
    stems: frozenset[str]


def _facts_of(evidence: Sequence[TurnCandidate]) -> list[_Fact]:
    facts: list[_Fact] = []
    for candidate in evidence:
        for raw in candidate.facts:
            text = _SAID_PREFIX_RE.sub("", raw, count=1).strip() or raw
            stems = frozenset(porter_stem(t) for t in tokenize(raw))
            facts.append(_Fact(text, raw, candidate, len(facts), stems))
    return facts


def _format_day(day: date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def _humanise_dates(text: str) -> str:
    """ISO dates -> "7 May 2023" (what people, and LoCoMo's references, write)."""

    def replace(match: re.Match[str]) -> str:
        try:
            return _format_day(date(int(match[1]), int(match[2]), int(match[3])))
        except ValueError:
            return match[0]

    return _ISO_DATE_RE.sub(replace, text)


def _turn_day(candidate: TurnCandidate) -> date | None:
    moment = parse_timestamp(candidate.timestamp)
    return moment.date() if moment else None


def time_mentions(fact_text: str, anchor: date | datetime | None) -> list[TimeMention]:
    """The relative time expressions of a fact, re-resolved against its turn's time (the
    extractor's appended resolutions are stripped first, so nothing is resolved twice)."""
    stripped = _RESOLUTION_RE.sub("", fact_text)
    return normalise_relative_times(stripped, anchor)[1]


def render_time(mention: TimeMention, anchor: date) -> str:
    """A time answer in the words a person would use, anchored to the turn's date:
    "yesterday" -> "7 May 2023"; "last Saturday" -> "the Saturday before 25 May 2023";
    "last week" -> "the week before 9 June 2023"; "next month" -> "June 2023"."""
    original = " ".join(mention.original.lower().split())
    start = date.fromisoformat(mention.start) if mention.start else anchor
    end = date.fromisoformat(mention.end) if mention.end else start
    if mention.kind == "vague":
        return _humanise_dates(mention.resolved)
    relation = "before" if end < anchor else "after" if start > anchor else "of"
    if "ago" in original.split() and re.search(r"\bweeks?\b|\bweekends?\b", original):
        return f"{original.rsplit(' ago', 1)[0]} before {_format_day(anchor)}"
    if mention.kind == "date":
        weekday = next((w for w in WEEKDAYS if w in original or w[:3] == original[-3:]), None)
        if weekday and relation != "of":
            return f"the {weekday.capitalize()} {relation} {_format_day(anchor)}"
        return _format_day(start)
    if re.search(r"\bweekend\b", original):
        return f"the weekend {relation} {_format_day(anchor)}"
    if re.search(r"\bweek\b", original):
        return f"the week {relation} {_format_day(anchor)}"
    return _humanise_dates(mention.resolved)


def explicit_date(text: str) -> str | None:
    """The first date written out in a fact ("on 2023-05-07", "May 7, 2023", "in June 2023")."""
    iso = _ISO_DATE_RE.search(text)
    if iso:
        return _humanise_dates(iso[0])
    match = _EXPLICIT_DATE_RE.search(text)
    if not match:
        return None
    if match["y1"]:
        return f"{int(match['d1'])} {match['m1']} {match['y1']}"
    if match["y2"]:
        return f"{int(match['d2'])} {match['m2']} {match['y2']}"
    if match["y3"]:
        return f"{match['m3']} {match['y3']}"
    return match["y4"]


# ---- cutting answers out of a fact -------------------------------------------------------------

_NUMBER_WORDS = _words(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty"
)
_COUNT = r"(?:\d+(?:\.\d+)?|a\s+couple\s+of|a\s+few|several|an?|" + "|".join(_NUMBER_WORDS) + ")"
_DURATION_RE = re.compile(
    rf"\b(?P<count>{_COUNT})\s+(?P<unit>(?:decade|year|month|week|day|hour|minute)s?)\b", re.I
)
_NUMBER_RE = re.compile(
    rf"(?P<money>[$£€])?\b(?P<num>\d+(?:[.,]\d+)?|{'|'.join(_NUMBER_WORDS)})\b", re.IGNORECASE
)
_TOKEN_RE = re.compile(r"[^\W_]+(?:['’\-+][^\W_]*)*|[\"“”]")
_CLAUSE_BREAK_RE = re.compile(r"[,;:!?.()\[\]]|\s[-–—]+\s|[–—]")
_QUOTED_RE = re.compile(r"[\"“]([^\"“”]{2,80})[\"”]")
_LOCATION_RE = re.compile(
    r"\b(?:in|at|to|from|near|around|visit(?:ed|ing)?|toward)\s+(?:the\s+)?"
    r"(?P<place>[A-Z][\w'’-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'’-]*)*)"
)
_REASON_RE = re.compile(r"\b(?:because(?:\s+of)?|'cause|cause|since|so\s+that|as)\s+", re.I)
_NEGATION_RE = re.compile(r"\b(?:not|never|no|nor)\b|n't\b", re.I)


def _digits(count: str) -> str:
    parsed = parse_count(count)
    if parsed is None or parsed[1]:
        return count
    return str(parsed[0])


def _duration(text: str) -> str | None:
    match = _DURATION_RE.search(_RESOLUTION_RE.sub("", text))
    if not match:
        return None
    return f"{_digits(match['count'])} {match['unit'].lower()}"


def _number(text: str, question: QuestionView) -> str | None:
    """The count a "how many" question asks for: the first number in the fact that is not a
    year or a date (those are resolutions), written in digits."""
    clean = _ISO_DATE_RE.sub(" ", _RESOLUTION_RE.sub(" ", text))
    for match in _NUMBER_RE.finditer(clean):
        value = match["num"]
        if re.fullmatch(r"(?:19|20)\d{2}", value) and value not in question.words:
            continue
        return (match["money"] or "") + _digits(value)
    return None


def _words_with_spans(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in _TOKEN_RE.finditer(text)]


def extract_span(fact: str, question: QuestionView) -> str:
    """The part of ``fact`` the question does not already say: runs of words between the
    question's words (not crossing a clause break), scored by how many informative words they
    hold and how close they sit to a matched question word; uninformative words trimmed off
    the ends; time expressions removed first. The whole fact when no run holds anything."""
    text = _RESOLUTION_RE.sub("", fact)
    # Time expressions are no answer to a "what" question ("for mental health last Saturday"):
    # any anchor finds them, only their wording is needed here.
    for mention in normalise_relative_times(text, date(2000, 1, 1))[1]:
        text = text.replace(mention.original, " , ")
    words = _words_with_spans(text)
    asked = [porter_stem(_bare(w)) in question.terms for _, _, w in words]
    breaks = [
        bool(_CLAUSE_BREAK_RE.search(text[words[i - 1][1] : words[i][0]]))
        for i in range(1, len(words))
    ]
    best = _best_run(words, asked, breaks)
    if best is None:
        return fact.strip()
    run_start, run_end = best
    while run_start < run_end and not _informative(words[run_start][2]):
        run_start += 1
    while run_end > run_start and not _informative(words[run_end - 1][2]):
        run_end -= 1
    if run_start >= run_end:
        return fact.strip()
    return text[words[run_start][0] : words[run_end - 1][1]].strip(' "“”')


def _runs(asked: list[bool], breaks: list[bool]) -> list[tuple[int, int]]:
    """Maximal [start, end) runs of words the question does not hold, cut at clause breaks."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, is_asked in enumerate(asked):
        if start is not None and (is_asked or breaks[i - 1]):
            runs.append((start, i))
            start = None
        if start is None and not is_asked:
            start = i
    if start is not None:
        runs.append((start, len(asked)))
    return runs


def _best_run(
    words: list[tuple[int, int, str]], asked: list[bool], breaks: list[bool]
) -> tuple[int, int] | None:
    matched = [i for i, a in enumerate(asked) if a and _is_content(words[i][2])]

    def same_clause(m: int, start: int, end: int) -> bool:
        return not any(breaks[k] for k in range(min(m, start), min(max(m, end - 1), len(breaks))))

    best: tuple[float, int, int] | None = None
    for start, end in _runs(asked, breaks):
        informative = sum(_informative(w) for _, _, w in words[start:end])
        if informative == 0:
            continue
        gap = min((min(abs(start - m), abs(m - (end - 1))) for m in matched), default=len(words))
        near = any(same_clause(m, start, end) for m in matched)
        score = informative / (1.0 + 0.5 * max(gap - 1, 0)) * (1.0 if near else 0.4)
        if best is None or score > best[0]:
            best = (score, start, end)
    return None if best is None else (best[1], best[2])


# Words that carry no answer on their own: a span made of them is not worth returning.
_VAGUE_WORDS = frozenset(
    _words(
        """got get gets getting lot lots thing things stuff way super really pretty highly
        special lately recently today yesterday tomorrow now later ago last next week weekend
        month year day time photo pic picture shared said asked say says tell told even still
        always never also just one bit kind sort whole others able"""
    )
)


def _informative(token: str) -> bool:
    """A word that can be (part of) an answer: not a stopword, filler or reaction."""
    key = _bare(token)
    return (
        bool(key)
        and key not in STOPWORDS
        and key not in SMALL_TALK_WORDS
        and key not in _VAGUE_WORDS
        and (len(key) > 1 or key.isdigit())
    )


def adds_information(answer: str, view: QuestionView) -> bool:
    """Whether an answer holds an informative word the question does not already hold."""
    return any(
        _informative(t) and porter_stem(_bare(t)) not in view.words for t in tokenize(answer)
    )


def _bare(word: str) -> str:
    key = normalise_apostrophes(word).lower().strip('"“”')
    return key[:-2] if key.endswith("'s") and len(key) > 2 else key


def _is_content(word: str) -> bool:
    key = _bare(word)
    return bool(key) and key not in STOPWORDS and (len(key) > 1 or key.isdigit())


# ---- the heuristic answerer --------------------------------------------------------------------


@dataclass
class HeuristicAnswerer:
    """Extractive, deterministic answers. The graph text is not read: the accepted evidence
    records hold the same facts.

    1. Facts: those of the evidence turns, restricted by ``facts_about`` (a question about
       Caroline is not answered from a fact about Melanie, nor one about a name the evidence
       never mentions).
    2. Ranking (``rank_facts``): weighted share of the question's content words in the fact
       (names and light verbs count less), facts sharing a turn with a matching fact also
       considered, small bonuses for adding new words and for holding the kind of thing
       asked (a date for "when", a number for "how many", a quoted title for "what").
    3. The bar: the best turn must hold at least ``min_coverage`` of the question's non-name
       content words (``exhausted_min_coverage`` after an exhausted search: the evidence was
       not judged sufficient), else "Not mentioned in the conversation."
    4. The answer is cut out of the best fact by question form (``shorten``); one that adds
       nothing to the question is skipped for the next fact. A question asking for several
       things ("What activities ...?") gets up to ``max_list_items`` answers from different
       turns, comma-separated. "Would X likely ...?" questions get "Likely yes" / "Likely no"
       from the evidence about X.
    """

    min_coverage: float = 0.4
    exhausted_min_coverage: float = 0.5
    max_list_items: int = 4
    name: str = field(default="heuristic", init=False)

    def __post_init__(self) -> None:
        for label, value in (
            ("min_coverage", self.min_coverage),
            ("exhausted_min_coverage", self.exhausted_min_coverage),
        ):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"answerer {label} must be in [0, 1], got {value}")

    def answer(
        self,
        question: Question,
        graph_text: str,
        evidence: list[TurnCandidate],
        exhausted: bool,
    ) -> AnswerResult:
        view = read_question(question.question)
        about_facts = facts_about(view, evidence)
        ranked = rank_facts(view, about_facts)
        if view.form == "yes_no" and _HYPOTHETICAL_RE.search(question.question):
            # "Would X likely ...?" asks for an inference no fact states: lean on whatever the
            # evidence says about X rather than demand a lexical match.
            if not about_facts:
                return AnswerResult(NOT_MENTIONED)
            basis = ranked[0].fact if ranked else about_facts[0]
            return AnswerResult("Likely no" if _NEGATION_RE.search(basis.text) else "Likely yes")
        bar = self.exhausted_min_coverage if exhausted else self.min_coverage
        ranked = [r for r in ranked if r.coverage >= bar]
        if not ranked:
            return AnswerResult(NOT_MENTIONED)
        parts: list[str] = []
        turns: set[str] = set()
        for item in ranked:
            if item.fact.candidate.turn_id in turns:
                continue
            part = shorten(item.fact, view)
            # An answer must add something to the question: "Highly recommend the book!"
            # does not answer "What book did she recommend?", so look further.
            if view.form != "yes_no" and not adds_information(part, view):
                continue
            if not view.is_list:
                return AnswerResult(part)
            turns.add(item.fact.candidate.turn_id)
            if part.lower() not in (p.lower() for p in parts):
                parts.append(part)
            if len(parts) == self.max_list_items:
                break
        return AnswerResult(", ".join(parts) if parts else NOT_MENTIONED)


@dataclass(frozen=True)
class _Ranked:
    fact: _Fact
    coverage: float  # share of the question's non-name content words the fact holds
    score: float  # what ranks facts: weighted coverage plus small answer-shape bonuses


_CAPITALISED_WORD_RE = re.compile(r"\b[A-Z][\w'’-]*")


def fact_subject(fact: _Fact, participants: set[str]) -> str | None:
    """Who a fact is about: the first participant it names, else its turn's speaker."""
    for word in _CAPITALISED_WORD_RE.findall(fact.text):
        stem = porter_stem(_bare(word))
        for participant in participants:
            if _same_name(stem, participant):
                return participant
    speaker = tokenize(fact.candidate.speaker)
    return porter_stem(speaker[0]) if speaker else None


def facts_about(view: QuestionView, evidence: Sequence[TurnCandidate]) -> list[_Fact]:
    """The evidence facts a question may be answered from.

    A question naming someone or something (capitalised in the question, acronyms aside) the
    evidence never mentions has none. A question naming a participant of the conversation (a
    speaker) is answered only from facts whose subject is a participant it names: "What did
    Caroline realise?" is not answered by a fact about Melanie.
    """
    facts = _facts_of(evidence)
    participants = {porter_stem(t) for c in evidence for t in tokenize(c.speaker)[:1]}
    if view.entity_stems:
        known = participants.union(*(f.stems for f in facts)) if facts else participants
        if not any(_same_name(n, k) for n in view.entity_stems for k in known):
            return []
    asked = {p for p in participants if any(_same_name(n, p) for n in view.name_stems)}
    if not asked:
        return facts
    return [f for f in facts if fact_subject(f, participants) in asked]


def rank_facts(view: QuestionView, facts: Sequence[_Fact]) -> list[_Ranked]:
    """Candidate facts, best first (ties: earlier evidence first).

    A fact sharing at least one non-name content word with the question is a candidate; so
    is any other fact of its turn, at half its turn's match: the fact that matches the
    question often only points at the answer its neighbour states ("Highly recommend it!"
    next to 'Caroline loved "Becoming Nicole"'). Coverage is measured on the whole turn
    (the union of its facts' words), the unit the evidence comes in.
    """
    direct = {f.order: _match(view, f) for f in facts}
    turn_stems: dict[str, set[str]] = {}
    turn_match: dict[str, float] = {}
    for fact in facts:
        turn_id = fact.candidate.turn_id
        turn_stems.setdefault(turn_id, set()).update(fact.stems)
        found = direct[fact.order]
        if found is not None:
            turn_match[turn_id] = max(turn_match.get(turn_id, 0.0), found)
    ranked = []
    for fact in facts:
        turn_id = fact.candidate.turn_id
        if turn_id not in turn_match:
            continue
        found = direct[fact.order]
        match = found if found is not None else 0.5 * turn_match[turn_id]
        if fact.raw.rstrip().endswith("?") or re.search(r"\basked:", fact.raw):
            match *= 0.6  # a question rarely holds its own answer
        coverage = _coverage(view, turn_stems[turn_id])
        ranked.append(_Ranked(fact, coverage, match + _bonus(view, fact)))
    return sorted(ranked, key=lambda r: (-r.score, r.fact.order))


def _matched_terms(view: QuestionView, stems: frozenset[str] | set[str]) -> set[str]:
    return {
        s
        for s in view.terms
        if s in stems or (s in view.name_stems and any(_same_name(s, t) for t in stems))
    }


def _coverage(view: QuestionView, stems: frozenset[str] | set[str]) -> float:
    """Weighted share of the question's non-name content words found in ``stems``."""
    plain = {s: w for s, w in view.terms.items() if s not in view.name_stems}
    if not plain:
        return 1.0
    matched = _matched_terms(view, stems)
    return sum(w for s, w in plain.items() if s in matched) / sum(plain.values())


def _match(view: QuestionView, fact: _Fact) -> float | None:
    """Weighted share of the question's words in the fact; None when none of its non-name
    words is there."""
    total = sum(view.terms.values())
    if total == 0:
        return None
    matched = _matched_terms(view, fact.stems)
    if any(s not in view.name_stems for s in view.terms) and all(
        s in view.name_stems for s in matched
    ):
        return None
    return sum(view.terms[s] for s in matched) / total


def _bonus(view: QuestionView, fact: _Fact) -> float:
    """Small preferences between facts that match the question about equally well."""
    novel = [t for t in tokenize(fact.text) if _informative(t) and porter_stem(t) not in view.words]
    # A fact that only echoes the question ("That charity race sounds great") says less than
    # one that adds something.
    bonus = 0.1 * min(len(novel), 4) / 4
    bonus += 0.15 * _form_bonus(view, fact)
    if view.form == "what" and any(not _mentioned(q, view) for q in _QUOTED_RE.findall(fact.text)):
        bonus += 0.15  # a quoted title is what "what book/song/sign ..." questions want
    return bonus


def _form_bonus(view: QuestionView, fact: _Fact) -> float:
    """Whether the fact holds the kind of thing the question asks for."""
    text = fact.raw
    if view.form in ("when", "how_long_ago"):
        return float(bool(_RESOLUTION_RE.search(text) or explicit_date(text)))
    if view.form == "how_long":
        return float(_duration(text) is not None)
    if view.form == "how_many":
        return float(_number(text, view) is not None)
    if view.form == "who":
        return float(any(not _mentioned(n, view) for n in proper_names(fact.text)))
    if view.form == "where":
        return float(bool(_LOCATION_RE.search(fact.text)))
    if view.form == "why":
        return float(bool(_REASON_RE.search(fact.text)))
    return 0.0


def _mentioned(name: str, view: QuestionView) -> bool:
    return all(any(_same_name(porter_stem(t), q) for q in view.words) for t in tokenize(name))


def shorten(fact: _Fact, view: QuestionView) -> str:
    """Cut the answer out of the chosen fact by question form (see the class docstring)."""
    text = fact.text
    anchor = _turn_day(fact.candidate)
    if view.form in ("when", "how_long_ago"):
        return _when(fact, view, anchor)
    if view.form == "how_long":
        return _duration(text) or extract_span(text, view)
    if view.form == "how_many":
        return _number(text, view) or extract_span(text, view)
    if view.form == "yes_no":
        return "No" if _NEGATION_RE.search(text) else "Yes"
    if view.form == "who":
        names = [n for n in proper_names(text) if not _mentioned(n, view)]
        return ", ".join(names[:3]) if names else extract_span(text, view)
    if view.form == "where":
        places = [
            m["place"] for m in _LOCATION_RE.finditer(text) if not _mentioned(m["place"], view)
        ]
        if places:
            return places[0]
        names = [n for n in proper_names(text) if not _mentioned(n, view)]
        return names[0] if names else extract_span(text, view)
    if view.form == "why":
        reason = _REASON_RE.search(text)
        if reason:
            return _CLAUSE_BREAK_RE.split(text[reason.end() :], maxsplit=1)[0].strip() or text
        return extract_span(text, view)
    quoted = [q for q in _QUOTED_RE.findall(text) if not _mentioned(q, view)]
    if quoted:
        return quoted[0]
    return extract_span(text, view)


def _when(fact: _Fact, view: QuestionView, anchor: date | None) -> str:
    mentions = time_mentions(fact.raw, anchor) if anchor else []
    if view.form == "how_long_ago":
        ago = next((m for m in mentions if " ago" in m.original.lower()), None)
        duration = _duration(ago.original if ago is not None else fact.text)
        if duration:
            return f"{duration} ago"
    if mentions and anchor is not None:
        return render_time(mentions[0], anchor)
    resolved = _RESOLUTION_RE.search(fact.raw)
    if resolved:
        return _humanise_dates(resolved[1])
    written = explicit_date(fact.raw)
    if written:
        return written
    return _format_day(anchor) if anchor else extract_span(fact.text, view)


# ---- the LLM answerer ------------------------------------------------------------------------

DEFAULT_PROMPT_NAME = "answer.txt"


def render_evidence(evidence: Sequence[TurnCandidate]) -> str:
    """One record per turn: id, date (weekday included: relative dates need it), speaker,
    the turn's facts."""
    if not evidence:
        return "(no evidence)"
    lines = []
    for candidate in evidence:
        moment = parse_timestamp(candidate.timestamp)
        when = moment.strftime("%Y-%m-%d (%A)") if moment else "unknown date"
        facts = " ".join(f.strip() for f in candidate.facts)
        lines.append(f"[{candidate.turn_id}] {when}, {candidate.speaker}: {facts}")
    return "\n".join(lines)


_EXHAUSTED_NOTE = (
    "The search for evidence ended without finding sufficient evidence. Answer only from what "
    "the evidence records state; if they do not contain the answer, reply exactly: "
    f"{NOT_MENTIONED}"
)
_SUFFICIENT_NOTE = "The search for evidence ended normally."


class LLMAnswerer:
    """Free-text answers from a chat model; the reply's first line, trimmed, is the answer."""

    name = "llm"

    def __init__(
        self,
        backend: LLMBackend,
        prompt_template: str | None = None,
        *,
        max_tokens: int = 128,
        temperature: float = 0.0,
        max_graph_chars: int = 6000,
    ) -> None:
        if max_tokens < 1:
            raise ConfigError(f"answerer max_tokens must be >= 1, got {max_tokens}")
        self.backend = backend
        self.prompt_template = prompt_template or load_prompt(DEFAULT_PROMPT_NAME)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_graph_chars = max_graph_chars

    def messages(
        self,
        question: Question,
        graph_text: str,
        evidence: Sequence[TurnCandidate],
        exhausted: bool,
    ) -> list[dict[str, str]]:
        asked_on = parse_timestamp(question.question_date)
        graph = (graph_text or "").strip() or "(empty)"
        if len(graph) > self.max_graph_chars:
            graph = graph[: self.max_graph_chars] + " ..."
        values = {
            "question": fence_data(question.question),
            "question_date": asked_on.strftime("%Y-%m-%d (%A)") if asked_on else "unknown",
            "graph": fence_data(graph),
            "evidence": fence_data(render_evidence(evidence)),
            "search_note": _EXHAUSTED_NOTE if exhausted else _SUFFICIENT_NOTE,
            "not_mentioned": NOT_MENTIONED,
        }
        return render_messages(self.prompt_template, values)

    def answer(
        self,
        question: Question,
        graph_text: str,
        evidence: list[TurnCandidate],
        exhausted: bool,
    ) -> AnswerResult:
        messages = self.messages(question, graph_text, evidence, exhausted)
        options = call_options(
            self.backend.complete,
            question.memory_id,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        try:
            completion = self.backend.complete(messages, **options)
        except (MeraError, ValueError) as exc:
            return AnswerResult("", *spent_tokens(exc), error=f"{type(exc).__name__}: {exc}")
        text = clean_answer(completion.text)
        error = None if text else "empty answer"
        return AnswerResult(text, completion.tokens_in, completion.tokens_out, error)


_ANSWER_LABEL_RE = re.compile(r"^\s*(?:final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


def clean_answer(text: str) -> str:
    """The answer line of a reply: reasoning blocks dropped, an "Answer:" label removed."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL | re.IGNORECASE)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    labelled = [line for line in lines if _ANSWER_LABEL_RE.match(line)]
    line = labelled[-1] if labelled else lines[0]
    return _ANSWER_LABEL_RE.sub("", line).strip().strip("\"'").strip()


# ---- the factory ---------------------------------------------------------------------------

_ANSWERERS = {"heuristic": HeuristicAnswerer, "llm": LLMAnswerer}
ANSWERER_KINDS = tuple(_ANSWERERS)


def make_answerer(kind: str, backend: LLMBackend | None = None, **params: Any) -> Answerer:
    """Build an answerer from configuration: ``kind`` is "heuristic" or "llm"."""
    return build_role("answerer", kind, _ANSWERERS, backend, params)


__all__ = [
    "ANSWERER_KINDS",
    "NOT_MENTIONED",
    "AnswerResult",
    "Answerer",
    "HeuristicAnswerer",
    "LLMAnswerer",
    "QuestionView",
    "clean_answer",
    "explicit_date",
    "extract_span",
    "make_answerer",
    "question_form",
    "read_question",
    "render_evidence",
    "render_time",
    "time_mentions",
]
