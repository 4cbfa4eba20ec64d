"""Training QA synthesis from training memories: questions, answers and gold evidence turns.

Three question types (``QA_TYPES``): single-hop (one statement, its key span asked for),
multi-hop (a second statement reachable only through an entity named in the first: the question
describes that entity by the first statement instead of naming it) and temporal (when something
happened, answered with the date the memory resolves).

Statements come from the atomic facts of the memory and, when the source has them, from LoCoMo's
``observation`` records (a fact with its evidence turn ids). The heuristic writer turns them into
cloze-style questions offline; ``LLMQuestionWriter`` asks any backend for natural questions. Every
item passes the same grounding check — the answer must be supported by the evidence turns and every
evidence turn must be a retrievable parent turn of the memory — and rejections are counted by reason.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import zip_longest
from typing import Any, Protocol

from mera_pipelines.core.embedding import Embedder
from mera_pipelines.core.errors import ConfigError, LLMCallError
from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.records import Fact, Question, Turn
from mera_pipelines.core.roles.common import build_role, fence_data, load_prompt, render_messages
from mera_pipelines.core.settings import settings_from_params
from mera_pipelines.core.temporal import normalise_relative_times, parse_timestamp
from mera_pipelines.core.text import (
    SMALL_TALK_WORDS,
    content_words,
    extract_keywords,
    proper_names,
    tokenize,
)

QA_TYPES = ("single_hop", "multi_hop", "temporal")
# "cloze": the statement with its key span asked for; "topic": LoCoMo-like questions that name
# the speaker and only a few of the statement's words (real questions share one to three words
# with their evidence, so a cloze question is far easier to retrieve for than a real one)
QUESTION_STYLES = ("cloze", "topic")
QUESTION_WRITER_PROMPT = "write_questions.txt"
# the "topic" style's multi-hop questions. "keyword": one speaker's 2-3 turns that share a rare
# word, asked about by that word. "category": first LoCoMo's list questions ("What pets does
# Nate have?"), whose evidence turns name instances of a category rather than the category's
# word, grouped by a sentence embedder; then keyword ones. "shared": first one speaker's 2-3
# turns about a word the other speaker also uses in 1-3 turns (LoCoMo's "What pets does Nate
# have?" meets Joanna's turns about pets), so the search meets distractors; then keyword ones.
AGGREGATES = ("keyword", "category", "shared")
# which of a statement's keywords a topic-style single-hop or temporal question names. "rare":
# its most distinctive ones, so the search finds the evidence turn at rank 1 almost always (the
# teacher's first round recovers 96 % of such single-hop evidence on the LoCoMo split, 77 % of
# the real questions'). "common": the ones the memory's other turns use most, so the search
# meets distractors, as LoCoMo's "What genre is Joanna's first screenplay?" does.
TOPIC_WORDS = ("rare", "common")

# "Maya said: ..." / "Theo asked: ..." prefixes of heuristic facts carry no content
_ATTRIBUTION_RE = re.compile(r"^\s*[\w' .-]{1,40}\b(?:said|asked|replied|added):\s*", re.I)
_RESOLVED_TIME_RE = re.compile(r"\s*\(((?:the week of |the weekend of |about )?[^()]{4,30})\)")
_ARTICLE_BEFORE_RE = re.compile(r"\b(?:the|a|an|his|her|their|my|our)\s+$", re.I)


@dataclass(frozen=True)
class Statement:
    """One atomic, self-contained statement of a memory with the turns that support it."""

    memory_id: str
    text: str
    turn_ids: tuple[str, ...]
    speaker: str
    time: str | None  # ISO time of the (first) evidence turn's session
    origin: str  # "fact" or "observation"


@dataclass(frozen=True)
class SynthesisSettings:
    writer: str = "heuristic"  # one of WRITERS
    max_per_memory: int = 60
    types: tuple[str, ...] = QA_TYPES
    seed: int = 0
    min_statement_words: int = 5
    max_answer_words: int = 8
    use_observations: bool = True
    # heuristic writer: keep only this many words either side of the asked word (single-hop)
    # or of a temporal question's statement; None keeps the whole statement. A whole-statement
    # question finds its evidence at rank 1 almost always, which leaves GRPO nothing to learn.
    question_window: int | None = None
    question_style: str = "cloze"  # heuristic writer: one of QUESTION_STYLES
    aggregate: str = "keyword"  # topic style's multi-hop questions: one of AGGREGATES
    topic_words: str = "rare"  # topic style's single-hop and temporal questions: TOPIC_WORDS
    # category aggregates: a statement joins its nearest category at this cosine similarity
    # or more (calibrated on the packaged MiniLM; other embedders have other scales)
    category_min_similarity: float = 0.3
    # writer "annotated": the source's own questions of these categories (LoCoMo "1".."4")
    annotated_categories: tuple[str, ...] = ("1", "2", "3", "4")

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> SynthesisSettings:
        params = dict(params or {})
        for key in ("types", "annotated_categories"):
            if key in params:
                params[key] = tuple(str(value) for value in params[key])
        settings = settings_from_params(cls, params, "training.synthesis")
        if settings.writer not in WRITERS:
            raise ConfigError(
                f"training.synthesis.writer {settings.writer!r} unknown; use one of {WRITERS}"
            )
        bad = sorted(set(settings.types) - set(QA_TYPES))
        if bad or not settings.types:
            raise ConfigError(f"training.synthesis.types {bad} unknown; use some of {QA_TYPES}")
        if settings.max_per_memory < 1:
            raise ConfigError("training.synthesis.max_per_memory must be >= 1")
        if settings.question_window is not None and settings.question_window < 1:
            raise ConfigError("training.synthesis.question_window must be >= 1 or null")
        if settings.question_style not in QUESTION_STYLES:
            raise ConfigError(
                f"training.synthesis.question_style {settings.question_style!r} unknown; "
                f"use one of {QUESTION_STYLES}"
            )
        if settings.aggregate not in AGGREGATES:
            raise ConfigError(
                f"training.synthesis.aggregate {settings.aggregate!r} unknown; "
                f"use one of {AGGREGATES}"
            )
        if settings.topic_words not in TOPIC_WORDS:
            raise ConfigError(
                f"training.synthesis.topic_words {settings.topic_words!r} unknown; "
                f"use one of {TOPIC_WORDS}"
            )
        return settings


@dataclass
class SynthesisReport:
    memories: list[str] = field(default_factory=list)
    statements: int = 0
    written: Counter = field(default_factory=Counter)  # by QA type
    rejected: Counter = field(default_factory=Counter)  # by reason
    writer_failures: list[str] = field(default_factory=list)  # "memory_id: why"

    def as_dict(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "statements": self.statements,
            "questions": sum(self.written.values()),
            "questions_by_type": dict(self.written),
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(self.rejected),
            "writer_failures": self.writer_failures,
        }


@dataclass(frozen=True)
class Draft:
    """A question before the grounding check."""

    memory_id: str
    question: str
    answer: str
    turn_ids: tuple[str, ...]
    qa_type: str


# ---- statements ---------------------------------------------------------------------------


def statements_from_facts(facts: Iterable[Fact], min_words: int = 5) -> list[Statement]:
    """Declarative facts without their "X said:" prefix; questions and small talk left out."""
    out = []
    for fact in facts:
        text = _ATTRIBUTION_RE.sub("", fact.text).strip()
        if text.endswith("?") or len(content_words(text)) < min_words - 2:
            continue
        if len(tokenize(text)) < min_words:
            continue
        out.append(
            Statement(fact.memory_id, text, (fact.turn_id,), fact.speaker, fact.timestamp, "fact")
        )
    return out


def observations_from_locomo(samples: Sequence[dict[str, Any]]) -> list[Statement]:
    """LoCoMo ``observation`` records: ``{session_N_observation: {speaker: [[text, ids]]}}``."""
    out = []
    for sample in samples:
        memory_id = str(sample.get("sample_id", ""))
        observations = sample.get("observation")
        if not memory_id or not isinstance(observations, dict):
            continue
        for per_speaker in observations.values():
            if not isinstance(per_speaker, dict):
                continue
            for speaker, items in per_speaker.items():
                for item in items if isinstance(items, list) else []:
                    statement = _observation(memory_id, str(speaker), item)
                    if statement is not None:
                        out.append(statement)
    return out


def _observation(memory_id: str, speaker: str, item: Any) -> Statement | None:
    if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[0], str):
        return None
    ids = item[1] if isinstance(item[1], list) else [item[1]]
    turn_ids = tuple(str(i).strip() for i in ids if isinstance(i, str) and i.strip())
    if not turn_ids:
        return None
    return Statement(memory_id, item[0].strip(), turn_ids, speaker, None, "observation")


def with_turn_times(statements: list[Statement], turns: Iterable[Turn]) -> list[Statement]:
    """Observations carry no time: give each the session time of its first evidence turn."""
    times = {(t.memory_id, t.turn_id): t.session_time for t in turns}
    return [
        s
        if s.time is not None
        else Statement(
            s.memory_id,
            s.text,
            s.turn_ids,
            s.speaker,
            times.get((s.memory_id, s.turn_ids[0])),
            s.origin,
        )
        for s in statements
    ]


# ---- the heuristic writer -------------------------------------------------------------------


def cloze(text: str, span: str, asked: str = "what") -> str | None:
    """``text`` with ``span`` replaced by ``asked`` (and an article before it dropped), as a
    question; None when the span does not occur or the rest is too short to ask anything."""
    match = re.search(r"(?<!\w)" + re.escape(span) + r"(?!\w)", text, re.I)
    if match is None:
        return None
    before = _ARTICLE_BEFORE_RE.sub("", text[: match.start()])
    after = text[match.end() :]
    question = f"{before}{asked}{after}".strip()
    question = re.sub(r"[\s.!;,:]+$", "", question) + "?"
    question = question[0].upper() + question[1:]
    return question if len(content_words(question)) >= 3 else None


def shorten_question(question: str, window: int, asked: str = "what") -> str:
    """Keep the first word (usually the subject) and ``window`` words either side of the asked
    word; without the asked word, the first ``2 * window + 1`` words after the first."""
    words = re.sub(r"[\s?]+$", "", question).split()
    lowered = [w.lower().strip(",.;:") for w in words]
    centre = lowered.index(asked) if asked in lowered else window + 1
    kept = words[max(1, centre - window) : centre + window + 1]
    return " ".join([words[0], *kept]).rstrip(",.;:") + "?"


def answer_span(statement: Statement, avoid: Iterable[str] = ()) -> str | None:
    """The span a single-hop question asks for: a name or noun of the statement, not its
    subject (the speaker) and not a word the caller wants to keep in the question."""
    avoided = {w.lower() for w in avoid} | {statement.speaker.lower()}
    first_word = (tokenize(statement.text) or [""])[0]
    for keyword in extract_keywords(statement.text, max_keywords=8):
        low = keyword.lower()
        if low in avoided or low == first_word or len(low) < 3:
            continue
        return keyword
    return None


@dataclass(frozen=True)
class Category:
    """A kind of thing LoCoMo's list questions ask a speaker about."""

    name: str
    description: str  # what a statement is compared with by the sentence embedder
    question: str  # with {speaker}; three content words, or grounding rejects it as too short


CATEGORIES = (
    Category(
        "activities",
        "a hobby or leisure activity someone does, like painting, pottery, hiking, camping or "
        "swimming",
        "What activities does {speaker} enjoy doing?",
    ),
    Category("books", "a book or novel someone read", "What books has {speaker} read?"),
    Category(
        "pets", "someone's pet dog, cat or other animal", "What pets does {speaker} have at home?"
    ),
    Category(
        "travel",
        "a place someone traveled to or visited on a trip",
        "Where has {speaker} traveled on trips?",
    ),
    Category(
        "events",
        "an event someone attended, like a festival, concert, parade, workshop or conference",
        "What events has {speaker} attended?",
    ),
    Category(
        "food", "food someone cooked, baked or likes to eat", "What food does {speaker} like?"
    ),
    Category(
        "music",
        "music someone plays or listens to, an instrument, a song or a band",
        "What music does {speaker} like?",
    ),
    Category(
        "sports",
        "a sport or exercise someone does, like running, yoga or football",
        "What sports does {speaker} play?",
    ),
    Category(
        "relaxing",
        "something someone does to relax and destress",
        "What does {speaker} do to relax and destress?",
    ),
    Category(
        "career",
        "someone's job, career, work or studies",
        "What has {speaker} said about work?",
    ),
    Category(
        "family",
        "something someone did with their kids, partner or parents",
        "What has {speaker} done with family?",
    ),
    Category(
        "art",
        "a painting, drawing or piece of art someone made",
        "What art has {speaker} made?",
    ),
    Category(
        "helping",
        "how someone volunteers or helps other people and the community",
        "How has {speaker} helped other people?",
    ),
    Category(
        "plans",
        "something someone plans or hopes to do in the future",
        "What does {speaker} plan to do in the future?",
    ),
    Category(
        "friends", "time someone spent with their friends", "What has {speaker} done with friends?"
    ),
    Category(
        "health",
        "an illness, injury or health problem someone had",
        "What health problems has {speaker} had?",
    ),
    Category(
        "learning",
        "a class, course, school or degree someone took",
        "What has {speaker} studied or learned?",
    ),
    Category(
        "belongings",
        "something someone bought or got as a gift",
        "What has {speaker} bought or received?",
    ),
    Category(
        "outdoors",
        "time someone spent outdoors in nature, like a hike, a beach or a camping trip",
        "What outdoor trips has {speaker} taken?",
    ),
    Category(
        "entertainment",
        "a movie, TV show or game someone watched or played",
        "What movies or games does {speaker} like?",
    ),
    Category(
        "challenges",
        "a hard time or setback someone went through",
        "What challenges has {speaker} faced?",
    ),
    Category(
        "achievements",
        "something someone achieved or is proud of",
        "What achievements is {speaker} proud of?",
    ),
    Category(
        "values",
        "what someone believes in and cares about most",
        "What values does {speaker} care about most?",
    ),
)


def category_of(question: str) -> str | None:
    """The category a question was written for by the category aggregate, or None: lets a
    report tell category questions from the other multi-hop ones."""
    for category in CATEGORIES:
        before, after = category.question.split("{speaker}")
        if question.startswith(before) and question.endswith(after):
            return category.name
    return None


class HeuristicQuestionWriter:
    """Questions from statements (offline, deterministic for a seed): cloze-style, or in the
    "topic" style LoCoMo's questions have (the speaker and a few of the evidence's words).
    The topic style's "category" aggregates need a sentence embedder (``embedder``)."""

    name = "heuristic"

    def __init__(
        self,
        max_answer_words: int = 8,
        question_window: int | None = None,
        question_style: str = "cloze",
        aggregate: str = "keyword",
        embedder: Embedder | None = None,
        min_category_similarity: float = 0.3,
        topic_words: str = "rare",
    ) -> None:
        if aggregate == "category" and embedder is None:
            raise ConfigError(
                "training.synthesis.aggregate=category needs the memory's sentence embedder"
            )
        self.max_answer_words = max_answer_words
        self.question_window = question_window
        self.question_style = question_style
        self.aggregate = aggregate
        self.embedder = embedder
        self.min_category_similarity = min_category_similarity
        self.topic_words = topic_words
        # one row per CATEGORIES entry, embedded once per writer (not per memory or group)
        self._category_vectors: Any = None

    def write(
        self, statements: list[Statement], types: Sequence[str], limit: int, rng: random.Random
    ) -> list[Draft]:
        pools = {
            "single_hop": self._single_hop,
            "temporal": self._temporal,
            "multi_hop": self._multi_hop,
        }
        if self.question_style == "topic":
            asked = _commonest_first(statements) if self.topic_words == "common" else None
            single_hop = partial(_topic_single_hop_item, asked=asked)
            temporal = partial(self._topic_temporal_item, asked=asked)
            pools = {
                "single_hop": lambda st: _drafts(st, "single_hop", single_hop),
                "temporal": lambda st: _drafts(st, "temporal", temporal),
                "multi_hop": self._topic_aggregate,
            }
            if self.aggregate == "category":
                pools["multi_hop"] = lambda st: (
                    self._category_aggregate(st) + self._topic_aggregate(st)
                )
            if self.aggregate == "shared":
                pools["multi_hop"] = partial(self._topic_aggregate, shared=True)
        shuffled = list(statements)
        rng.shuffle(shuffled)
        per_type = max(1, limit // len(types))
        by_type = [pools[qa_type](shuffled)[:per_type] for qa_type in types]
        # interleaved, so a per-memory cap downstream keeps every type, not just the first
        return [d for group in zip_longest(*by_type) for d in group if d is not None]

    def _shorten(self, question: str) -> str:
        """The question cut to the window, widened until it keeps 3 content words (fewer
        ask nothing answerable), or whole when no window does."""
        assert self.question_window is not None
        for window in range(self.question_window, self.question_window + 4):
            short = shorten_question(question, window)
            if len(content_words(short)) >= 3:
                return short
        return question

    def _single_hop(self, statements: list[Statement]) -> list[Draft]:
        out = []
        for s in statements:
            span = answer_span(s)
            question = cloze(s.text, span) if span else None
            if question and self.question_window:
                question = self._shorten(question)
            if question:
                out.append(Draft(s.memory_id, question, span, s.turn_ids, "single_hop"))
        return out

    def _temporal(self, statements: list[Statement]) -> list[Draft]:
        out = []
        for s in statements:
            resolved = self._resolved_time(s)
            if resolved is None:
                continue
            text, when = resolved
            body = re.sub(r"[\s.!?;,:]+$", "", text)
            if self.question_window:
                body = self._shorten(body)[:-1]
            question = f"When did this happen: {body}?"
            out.append(Draft(s.memory_id, question, when, s.turn_ids, "temporal"))
        return out

    @staticmethod
    def _resolved_time(s: Statement) -> tuple[str, str] | None:
        """(statement without the time, the time) when a relative time resolves to a date."""
        text = s.text
        if s.origin == "observation":  # observations keep "last month": resolve them now
            text, mentions = normalise_relative_times(text, parse_timestamp(s.time))
            if not mentions:
                return None
        match = _RESOLVED_TIME_RE.search(text)
        if match is None or not any(ch.isdigit() for ch in match.group(1)):
            return None
        when = match.group(1)
        # drop the relative expression with its resolution ("last month (February 2023)")
        before = re.sub(
            r"\s*\b(?:on|in|at|last|next|this)?\s*[\w-]*\s*$", "", text[: match.start()]
        )
        return (before + text[match.end() :]).strip(), when

    def _multi_hop(self, statements: list[Statement]) -> list[Draft]:
        """s1 names a bridge entity E; s2 (another turn) says something about E. The question
        asks s2's span and describes E by s1 without naming it, so E is found in hop one."""
        by_entity: dict[tuple[str, str], list[Statement]] = defaultdict(list)
        for s in statements:
            for name in proper_names(s.text):
                if name.lower() != s.speaker.lower():
                    by_entity[(s.memory_id, name)].append(s)
        out = []
        for (_, entity), group in by_entity.items():
            if len(group) < 2 or len(group) > 6:  # a bridge must be specific, not everywhere
                continue
            first = group[0]
            second = next(
                (g for g in group[1:] if set(g.turn_ids).isdisjoint(first.turn_ids)), None
            )
            if second is None:
                continue
            # the answer must not already be in the description of the bridge
            span = answer_span(second, avoid=[*tokenize(entity), *tokenize(first.text)])
            asked = cloze(second.text, span) if span else None
            description = cloze(first.text, entity, "someone")
            if not asked or not description or entity.lower() not in second.text.lower():
                continue
            hidden = re.sub(re.escape(entity), "that one", asked, flags=re.I)
            if entity.lower() in hidden.lower():
                continue
            question = f"{description[:-1]}. About that one: {hidden}"
            turn_ids = tuple(dict.fromkeys(first.turn_ids + second.turn_ids))
            out.append(Draft(first.memory_id, question, span, turn_ids, "multi_hop"))
        return out

    # ---- the "topic" style ----

    def _topic_temporal_item(
        self, s: Statement, asked: AskedWords | None = None
    ) -> tuple[str, str] | None:
        """Asks "When did John mention violin concert enjoyed?": up to three keywords of the
        statement without its time (with ``asked``, the two it orders first); the answer is
        the resolved date."""
        resolved = self._resolved_time(s)
        words = topic_keywords(resolved[0], s.speaker) if resolved else []
        words = asked(words)[:2] if asked else words[:3]
        if resolved is None or len(words) < 2:
            return None
        return f"When did {s.speaker} mention {' '.join(words)}?", resolved[1]

    def _topic_aggregate(self, statements: list[Statement], shared: bool = False) -> list[Draft]:
        """LoCoMo's multi-hop questions gather one speaker's statements across sessions ("What
        pets does Nate have?"): a keyword a speaker uses in 2-3 different turns is asked about;
        all those turns are the evidence. The word is used nowhere else in the memory; when
        ``shared``, questions about words that 1-3 of the other speakers' turns use too (which
        the search meets as distractors; the question names whose turns it asks about) come
        first, then those."""
        by_word: dict[tuple[str, str], list[Statement]] = defaultdict(list)
        for s in statements:
            for word in topic_keywords(s.text, s.speaker):
                by_word[(s.memory_id, word.lower())].append(s)
        alone, with_others = [], []
        for (_, word), group in by_word.items():
            for speaker in dict.fromkeys(s.speaker for s in group):
                own = [s for s in group if s.speaker == speaker]
                turn_ids = tuple(dict.fromkeys(t for s in own for t in s.turn_ids))
                elsewhere = {t for s in group if s.speaker != speaker for t in s.turn_ids}
                if not 2 <= len(turn_ids) <= 3:
                    continue
                if not elsewhere:
                    target = alone
                elif shared and 1 <= len(elsewhere - set(turn_ids)) <= 3:
                    target = with_others
                else:
                    continue
                draft = _aggregate_draft(own, word, speaker, turn_ids)
                if draft is not None:
                    target.append(draft)
        return with_others + alone if shared else alone

    def _category_aggregate(self, statements: list[Statement]) -> list[Draft]:
        """LoCoMo's list questions ("What books has Melanie read?"): per speaker and category,
        the statements about that speaker the embedder places closest to the category (it must
        be their nearest category, at ``min_category_similarity`` or more), one per session,
        up to three; the question names the category, the evidence turns its instances."""
        assert self.embedder is not None
        about_speaker = [s for s in statements if _names_speaker(s)]
        if not about_speaker:
            return []
        # unit vectors (the Embedder contract): products are cosine similarities
        statement_vectors = self.embedder.embed([s.text for s in about_speaker])
        similarity = statement_vectors @ self._categories().T
        groups: dict[tuple[str, str, int], list[tuple[float, Statement]]] = defaultdict(list)
        for row, s in enumerate(about_speaker):  # insertion order follows the shuffled input
            nearest = int(similarity[row].argmax())
            if similarity[row, nearest] >= self.min_category_similarity:
                groups[(s.memory_id, s.speaker, nearest)].append(
                    (float(similarity[row, nearest]), s)
                )
        out = []
        for (memory_id, speaker, nearest), members in groups.items():
            chosen = _one_per_session([s for _, s in sorted(members, key=lambda m: -m[0])], 3)
            if len(chosen) < 2:
                continue
            category = CATEGORIES[nearest]
            question = category.question.format(speaker=speaker)
            answer = self._instances(chosen[:2], speaker, self._categories()[nearest], question)
            if not answer:
                continue
            turn_ids = tuple(dict.fromkeys(t for s in chosen for t in s.turn_ids))
            out.append(Draft(memory_id, question, answer, turn_ids, "multi_hop"))
        return out

    def _categories(self) -> Any:
        assert self.embedder is not None
        if self._category_vectors is None:
            self._category_vectors = self.embedder.embed([c.description for c in CATEGORIES])
        return self._category_vectors

    def _instances(
        self, statements: list[Statement], speaker: str, target: Any, question: str
    ) -> str:
        """The answer: per statement, its keyword nearest the category (``target``, its
        vector: "pottery" for activities), not a word of the question."""
        assert self.embedder is not None
        asked = {w.lower() for w in tokenize(question)}
        found = []
        for s in statements:
            words = [w for w in topic_keywords(s.text, speaker) if w.lower() not in asked]
            if words:
                found.append(words[int((self.embedder.embed(words) @ target).argmax())])
        return ", ".join(dict.fromkeys(found))


def _aggregate_draft(
    group: list[Statement], word: str, speaker: str, turn_ids: tuple[str, ...]
) -> Draft | None:
    """The aggregate question ("What has Maya mentioned about pottery?"); its answer is a
    keyword of the group's later statements that is not the asked word."""
    answer = next(
        (
            w
            for s in group[1:]
            for w in topic_keywords(s.text, speaker)
            if w.lower() != word and len(w) > 3
        ),
        None,
    )
    if answer is None:
        return None
    question = f"What has {speaker} mentioned about {word}?"
    return Draft(group[0].memory_id, question, answer, turn_ids, "multi_hop")


def _names_speaker(s: Statement) -> bool:
    """Whether the statement is about its speaker by name ("Melanie has a dog"): facts without
    the name are often the speaker's comments on the other person's news."""
    first_name = (tokenize(s.speaker) or [""])[0]
    return bool(first_name) and first_name in {w.lower() for w in tokenize(s.text)}


def _one_per_session(statements: list[Statement], limit: int) -> list[Statement]:
    """The first statements whose evidence lies in sessions not yet taken (LoCoMo turn ids are
    ``D<session>:<turn>``; other ids count as their own session)."""
    chosen: list[Statement] = []
    sessions: set[str] = set()
    for s in statements:
        session = s.turn_ids[0].split(":")[0]
        if session not in sessions:
            sessions.add(session)
            chosen.append(s)
        if len(chosen) == limit:
            break
    return chosen


# orders a statement's other keywords by which a question should name first
AskedWords = Callable[[list[str]], list[str]]


def _commonest_first(statements: list[Statement]) -> AskedWords:
    """Orders keywords by how many of the memory's turns use them, most first; a phrase counts
    as its rarest word. Stable, so ties keep the keywords' own order of importance."""
    turns_using: dict[str, set[str]] = defaultdict(set)
    for s in statements:
        for word in set(tokenize(s.text)):
            turns_using[word].update(s.turn_ids)

    def turns(keyword: str) -> int:
        return min((len(turns_using[w]) for w in tokenize(keyword)), default=0)

    return lambda words: sorted(words, key=lambda w: -turns(w))


def _topic_single_hop_item(s: Statement, asked: AskedWords | None = None) -> tuple[str, str] | None:
    """Asks "What did Nate say about fourth and video?" for "Nate won the fourth video game
    tournament": the first keyword is the answer, the next two are asked about (with
    ``asked``, the two of the others it orders first)."""
    words = topic_keywords(s.text, s.speaker)
    if len(words) < 3:
        return None
    others = asked(words[1:]) if asked else words[1:]
    return f"What did {s.speaker} say about {others[0]} and {others[1]}?", words[0]


def _drafts(
    statements: list[Statement], qa_type: str, write: Callable[[Statement], tuple[str, str] | None]
) -> list[Draft]:
    """One draft per statement ``write`` makes a (question, answer) of."""
    out = []
    for s in statements:
        written = write(s)
        if written is not None:
            out.append(Draft(s.memory_id, written[0], written[1], s.turn_ids, qa_type))
    return out


def topic_keywords(text: str, speaker: str) -> list[str]:
    """A statement's keywords in order of importance, without the speaker's name and small
    talk: what a topic-style question may ask about."""
    avoided = set(tokenize(speaker))
    return [
        k
        for k in extract_keywords(text, max_keywords=8)
        if len(k) > 2 and not set(tokenize(k)) & avoided and k.lower() not in SMALL_TALK_WORDS
    ]


# ---- the LLM writer ---------------------------------------------------------------------------

WRITER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "answer": {"type": "string"},
                    "evidence": {"type": "array", "items": {"type": "string"}},
                    "type": {"type": "string"},
                },
                "required": ["question", "answer", "evidence"],
            },
        }
    },
    "required": ["questions"],
}


class LLMQuestionWriter:
    """Natural questions from a backend, a batch of numbered statements at a time."""

    def __init__(self, backend: LLMBackend, batch_size: int = 12, max_tokens: int = 1024) -> None:
        self.backend = backend
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.template = load_prompt(QUESTION_WRITER_PROMPT)
        self.name = f"llm:{getattr(backend, 'model_name', 'model')}"
        self.failures: list[str] = []

    def write(
        self, statements: list[Statement], types: Sequence[str], limit: int, rng: random.Random
    ) -> list[Draft]:
        shuffled = list(statements)
        rng.shuffle(shuffled)
        drafts: list[Draft] = []
        for start in range(0, len(shuffled), self.batch_size):
            if len(drafts) >= limit:
                break
            drafts.extend(self._batch(shuffled[start : start + self.batch_size], types))
        return drafts

    def _batch(self, batch: list[Statement], types: Sequence[str]) -> list[Draft]:
        lines = "\n".join(
            f"[{'/'.join(s.turn_ids)}] ({s.time or 'unknown time'}) {fence_data(s.text)}"
            for s in batch
        )
        messages = render_messages(self.template, {"statements": lines, "types": ", ".join(types)})
        memory_id = batch[0].memory_id
        try:
            completion = self.backend.complete_json(
                messages, schema=WRITER_SCHEMA, max_tokens=self.max_tokens, temperature=0.0
            )
        except LLMCallError as exc:
            self.failures.append(f"{memory_id}: {exc}")
            return []
        items = (
            completion.parsed.get("questions", []) if isinstance(completion.parsed, dict) else []
        )
        drafts = []
        for item in items if isinstance(items, list) else []:
            draft = _draft_from_item(memory_id, item, types)
            if draft is not None:
                drafts.append(draft)
        return drafts


def _draft_from_item(memory_id: str, item: Any, types: Sequence[str]) -> Draft | None:
    if not isinstance(item, dict):
        return None
    question, answer = item.get("question"), item.get("answer")
    evidence = item.get("evidence")
    if not isinstance(question, str) or not isinstance(answer, str):
        return None
    ids: list[str] = []
    for value in evidence if isinstance(evidence, list) else []:
        ids.extend(part.strip() for part in str(value).split("/") if part.strip())
    qa_type = item.get("type") if item.get("type") in types else types[0]
    return Draft(memory_id, question.strip(), answer.strip(), tuple(ids), str(qa_type))


_WRITERS = {"heuristic": HeuristicQuestionWriter, "llm": LLMQuestionWriter}
# the question writers write from the training memories' statements; "annotated" takes the
# source's own annotated questions of the training memories (a dataset whose training
# conversations come with questions and evidence; the LoCoMo split's figures are for synthesised
# questions, the annotated ones measure how far the synthesis is from real questions)
WRITERS = (*_WRITERS, "annotated")


class QuestionWriter(Protocol):
    name: str

    def write(
        self, statements: list[Statement], types: Sequence[str], limit: int, rng: random.Random
    ) -> list[Draft]: ...


def make_question_writer(kind: str, backend: LLMBackend | None = None, **params: Any):
    return build_role("question writer", kind, _WRITERS, backend, params)


# ---- grounding and the whole stage -----------------------------------------------------------


def grounding_problem(
    draft: Draft, turn_text: dict[str, str], indexed_turns: set[str], max_answer_words: int
) -> str | None:
    """Why a draft is rejected, or None when it is grounded and usable."""
    if not draft.turn_ids:
        return "no_evidence"
    if any(t not in turn_text or t not in indexed_turns for t in draft.turn_ids):
        return "evidence_not_in_memory"
    answer_words = content_words(draft.answer)
    if not answer_words or len(tokenize(draft.answer)) > max_answer_words:
        return "answer_length"
    if len(content_words(draft.question)) < 3:
        return "question_too_short"
    question_words = {w.lower() for w in tokenize(draft.question)}
    if all(w.lower() in question_words for w in answer_words):
        return "answer_in_question"
    evidence = " ".join(turn_text[t] for t in draft.turn_ids)
    evidence_words = {w.lower() for w in tokenize(evidence)}
    if not all(w.lower() in evidence_words for w in answer_words):
        return "answer_not_in_evidence"
    return None


def synthesize_questions(
    memory_ids: Sequence[str],
    turns: Sequence[Turn],
    facts: Sequence[Fact],
    writer: QuestionWriter,
    settings: SynthesisSettings,
    observations: Sequence[Statement] = (),
) -> tuple[list[Question], SynthesisReport]:
    """Grounded questions for each memory in ``memory_ids`` (training memories only)."""
    wanted = set(memory_ids)
    report = SynthesisReport(memories=sorted(wanted))
    questions: list[Question] = []
    for memory_id in sorted(wanted):
        memory_turns = [t for t in turns if t.memory_id == memory_id]
        turn_text = {t.turn_id: _turn_text(t) for t in memory_turns}
        memory_facts = [f for f in facts if f.memory_id == memory_id]
        indexed = {f.turn_id for f in memory_facts}
        statements = statements_from_facts(memory_facts, settings.min_statement_words)
        if settings.use_observations:
            own = [o for o in observations if o.memory_id == memory_id]
            statements = with_turn_times(own, memory_turns) + statements
        report.statements += len(statements)
        rng = random.Random(f"{settings.seed}:{memory_id}")
        drafts = writer.write(statements, settings.types, settings.max_per_memory * 2, rng)
        seen: set[str] = set()
        kept = 0
        for draft in drafts:
            key = " ".join(tokenize(draft.question))
            problem = "duplicate" if key in seen else None
            problem = problem or grounding_problem(
                draft, turn_text, indexed, settings.max_answer_words
            )
            if problem:
                report.rejected[problem] += 1
                continue
            if kept >= settings.max_per_memory:
                break
            seen.add(key)
            kept += 1
            report.written[draft.qa_type] += 1
            questions.append(_question(draft, kept))
    report.writer_failures.extend(getattr(writer, "failures", []))
    return questions, report


def annotated_questions(
    memory_ids: Sequence[str],
    questions: Sequence[Question],
    facts: Sequence[Fact],
    settings: SynthesisSettings,
) -> tuple[list[Question], SynthesisReport]:
    """The source's own questions of the training memories, in ``settings.annotated_categories``,
    as training questions: abstention questions and questions without evidence among the
    memory's indexed turns are rejected and counted, as synthesised ones are; at most
    ``max_per_memory`` per memory, drawn with ``settings.seed`` so every category stays."""
    wanted = set(memory_ids)
    report = SynthesisReport(memories=sorted(wanted))
    indexed: dict[str, set[str]] = defaultdict(set)
    for fact in facts:
        indexed[fact.memory_id].add(fact.turn_id)
    kept: list[Question] = []
    for memory_id in sorted(wanted):
        own = [q for q in questions if q.memory_id == memory_id]
        random.Random(f"{settings.seed}:{memory_id}").shuffle(own)
        taken = 0
        for question in own:
            problem = _annotation_problem(question, indexed[memory_id], settings)
            if problem:
                report.rejected[problem] += 1
                continue
            if taken >= settings.max_per_memory:
                break
            taken += 1
            report.written[question.category] += 1
            kept.append(question)
    return sorted(kept, key=lambda q: (q.memory_id, q.question_id)), report


def _annotation_problem(
    question: Question, indexed_turns: set[str], settings: SynthesisSettings
) -> str | None:
    if question.category not in settings.annotated_categories:
        return "category_not_used"
    if question.is_abstention:
        return "abstention"
    if not question.gold_turn_ids:
        return "no_evidence"
    if any(t not in indexed_turns for t in question.gold_turn_ids):
        return "evidence_not_in_memory"
    return None


def _turn_text(turn: Turn) -> str:
    """The turn as evidence: its words and the dates its relative times resolve to."""
    text, _ = normalise_relative_times(turn.text, parse_timestamp(turn.session_time))
    return " ".join(p for p in (turn.speaker, text, turn.image_caption or "") if p)


def _question(draft: Draft, number: int) -> Question:
    return Question(
        question_id=f"syn-{draft.memory_id}-{number:04d}",
        memory_id=draft.memory_id,
        question=draft.question,
        answer=draft.answer,
        category=draft.qa_type,
        gold_turn_ids=list(draft.turn_ids),
    )
