"""Plain-text helpers shared by extraction, retrieval and scoring.

No NLP models: regular expressions and small hand-written word lists, so the results are
deterministic and fast. English only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Curly quotes are common in chat logs; matching is easier on one apostrophe.
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

STOPWORDS: frozenset[str] = _word_set(
    """
    a about above after again against ago all almost also am among an and any anyone anything
    are aren't around as at be because been before being below between both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't down during each either else
    enough even ever every few for from further get gets had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's however i
    i'd i'll i'm i've if in into is isn't it it'd it'll it's its itself just let's may me
    might mine more most much must mustn't my myself neither no nor not now of off often on
    once one only or other others ought our ours ourselves out over own per quite rather really
    same shall shan't she she'd she'll she's should shouldn't since so some something such than
    that that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those though through thus to too toward towards under until up upon
    us very via was wasn't we we'd we'll we're we've were weren't what what's whatever when
    when's where where's whether which while who who's whom whose why why's will with within
    without won't would wouldn't yet you you'd you'll you're you've your yours yourself
    yourselves also yeah yes ok okay oh
    """
)

# Words of greeting, thanks, reaction and filler: a sentence made only of these (plus
# stopwords and names) carries no fact.
SMALL_TALK_WORDS: frozenset[str] = _word_set(
    """
    hi hey hello hiya howdy yo bye goodbye cya later thanks thank thx ty cheers welcome
    haha hahaha hehe lol lmao rofl omg wow whoa woah aww awww yay woohoo ugh hmm hm um uh
    oops ooh ah aha great good nice cool awesome amazing wonderful fantastic fabulous
    incredible terrific super sweet lovely brilliant excellent perfect beautiful gorgeous
    stunning neat fun glad happy sorry congrats congratulations sure totally definitely
    absolutely exactly indeed true right agree agreed same too sounds sound seems looks look
    see seeing nice well pretty kind kinda sorta lot lots much thing things stuff everything
    anything something nothing new going doing done been feel feeling felt love loved loving
    like hope hoping wish care take talk talking chat chatting catch soon again time great
    day care keep appreciate appreciated means mean meant much guess think thought know
    believe bet wait forward dear buddy friend pal mate man dude guys yep yup nope phew whew
    go gonna wanna gotta worries luck prob np hear yea ya yah
    """
)

# Frequent verbs, adjectives and adverbs that make poor keywords (no POS tagger here).
_GENERIC_WORDS: frozenset[str] = _word_set(
    """
    get got gotten getting go goes going went gone make makes made making feel feels felt
    think thinks thought know knows knew want wants wanted need needs needed like likes liked
    love loves loved see saw seen say says said tell told come came take took taken give gave
    given find found look looks looked try tried trying keep kept let seem seems seemed put
    really great good nice awesome amazing cool wow yeah glad sure totally definitely always
    never still even much many way lot lots thing things stuff something anything everything
    nothing someone everyone anyone kind sort bit little big also actually probably maybe
    pretty super well quite able lately recently today yesterday tomorrow time times day days
    week weeks month months year years ago back since new old best better last next first
    made makes doing done does did been being having has have use used using start started
    happy excited glad thanks thank hey hi hello haha lol oh omg cause 'cause shared share
    photo photos pic pics picture pictures image gonna wanna gotta huh asked two three four
    five six seven eight nine ten
    """
)

_ABBREVIATIONS = _word_set(
    """
    dr mr mrs ms mx prof sr jr st vs etc e.g i.e eg ie approx dept est fig inc ltd co corp
    mt no vol jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur
    thurs fri sat sun a.m p.m am pm u.s u.k ph.d
    """
)

# A sentence ends at . ! ? … (any run, then closing quotes/brackets) followed by space and a
# sentence start; at ! or ? followed by any word (chat rarely capitalises); or at an emoji run
# followed by space and a capital letter.
_TERMINATOR_RE = re.compile(
    r"(?P<end>[.!?…]+['\")\]]*(?:\s*[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]+)*)"
    r"\s+(?=[\"'(\[]?[A-Z0-9])"
    r"|(?P<bang>[!?]+['\")\]]*(?:\s*[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]+)*)"
    r"\s+(?=[a-z])"
    r"|(?P<emoji>[\U0001F000-\U0001FAFF\u2600-\u27BF][\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]*)"
    r"\s+(?=[A-Z])"
)
_LIST_MARKER_RE = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)]|#{1,6})\s+")
_EMPHASIS_RE = re.compile(r"\*\*|__|`+")
_HAS_WORD_RE = re.compile(r"[^\W_]")

# A capitalised word, or an all-caps acronym, possibly with an apostrophe part ("O'Neil").
_CAPITALISED_RE = re.compile(r"^(?:[A-Z][\w'&.-]*)$")
_NAME_JOINERS = frozenset({"of", "the", "de", "van", "von", "&"})
_NOT_NAMES = _word_set(
    """
    i i'm i've i'd i'll ok okay hey hi hello wow yes yeah no oh omg haha lol thanks thank
    mr mrs ms dr
    """
)

TOPIC_LEXICON: dict[str, frozenset[str]] = {
    label: _word_set(words)
    for label, words in {
        "work": """work job jobs career office boss manager colleague colleagues coworker
            coworkers promotion promoted salary hired hiring interview interviews
            company startup business client clients project projects deadline meeting
            meetings shift workplace employer employee resume internship profession
            professional entrepreneur venture hustle store shop""",
        "family": """family mom mother dad father parent parents son daughter kids kid
            children child baby babies brother sister sibling siblings grandma grandpa
            grandmother grandfather grandparents aunt uncle cousin niece nephew husband
            wife spouse relatives""",
        "relationships": """friend friends friendship boyfriend girlfriend partner dating
            date dated relationship relationships breakup marriage married wedding engaged
            engagement romance romantic crush mentor mentors""",
        "pets": """pet pets dog dogs puppy puppies cat cats kitten kittens bird birds
            hamster fish turtle turtles rabbit bunny horse vet leash""",
        "travel": """travel traveling travelling trip trips vacation holiday holidays
            flight flights airport abroad visit visited visiting tour tourist hotel
            beach camping camp hiking hike passport country countries city cities roadtrip
            cruise destination""",
        "health": """health healthy doctor hospital sick illness ill injury injured
            surgery therapy medication medicine diet exercise workout workouts gym fitness
            yoga running run marathon weight sleep pain recovery recover diagnosed
            diagnosis allergy allergies nutrition""",
        "food": """food cook cooking cooked recipe recipes bake baking baked cake cookies
            dinner lunch breakfast meal meals restaurant cafe coffee tea pizza pasta
            dish dishes vegan vegetarian snack snacks dessert eat eating ate grill""",
        "hobbies": """hobby hobbies paint painting paintings painter art artist artwork
            draw drawing sketch music song songs sing singing band concert guitar piano
            violin instrument play played playing game games gaming sport sports soccer
            football basketball baseball tennis swimming swim surfing surf skiing
            pottery photography book books reading read novel novels
            writing write poetry poem dance dancing movie movies film films garden
            gardening knitting craft crafts festival museum theater theatre""",
        "education": """school college university class classes course courses study
            studying studied student students degree exam exams teacher professor
            lesson lessons learn learning graduate graduated graduation homework
            semester education scholarship workshop certification""",
        "home": """home house apartment move moved moving relocate relocated rent
            renting neighborhood neighbourhood neighbor neighbors room kitchen yard
            renovation renovate furniture decorate decorating roommate""",
        "money": """money budget budgeting savings save saving invest investing
            investment loan debt pay paid price prices cost costs expensive cheap bank
            finance financial income donation donate donated fundraiser fundraising
            charity rent mortgage""",
        "events": """birthday party parties celebration celebrate celebrated anniversary
            wedding graduation festival holiday christmas thanksgiving halloween easter
            parade event events ceremony concert conference reunion""",
        "emotions": """feel feeling feelings felt stress stressed anxious anxiety
            depressed depression lonely sad happy happiness grateful thankful proud
            scared afraid nervous overwhelmed excited frustrated angry upset worried
            mental emotional emotions therapy therapist counseling counselor support
            self-care selfcare mindfulness meditation struggle struggling""",
        "technology": """computer computers laptop phone smartphone app apps software
            code coding programming programmer tech technology internet online website
            ai robot gadget gadgets device devices video videos camera blog youtube
            instagram social media""",
    }.items()
}
GENERAL_TOPIC = "general"
TOPIC_LABELS: tuple[str, ...] = (*TOPIC_LEXICON, GENERAL_TOPIC)


def normalise_apostrophes(text: str) -> str:
    return text.translate(_APOSTROPHES)


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens; contractions kept whole ("don't"), possessive 's dropped."""
    tokens = _WORD_RE.findall(normalise_apostrophes(text).lower())
    return [t[:-2] if t.endswith("'s") and len(t) > 2 else t for t in tokens]


def content_words(text: str) -> list[str]:
    """Tokens that are not stopwords (order and repeats kept, for counting)."""
    return [t for t in tokenize(text) if t not in STOPWORDS and (len(t) > 1 or t.isdigit())]


def substantive_words(text: str, names: Iterable[str] = ()) -> list[str]:
    """Content words that are neither small talk nor the given names (nor their short
    forms: "Mel" for "Melanie")."""
    name_tokens = {t for name in names for t in tokenize(name)}
    return [
        t
        for t in content_words(text)
        if t not in SMALL_TALK_WORDS
        and not _is_name_or_short_form(t, name_tokens)
        and not t.isdigit()
        and "'" not in t  # "how'd", "what'll": function words
    ]


def _is_name_or_short_form(token: str, name_tokens: set[str]) -> bool:
    return token in name_tokens or (
        len(token) >= 3 and any(name.startswith(token) for name in name_tokens)
    )


def is_small_talk(sentence: str, names: Iterable[str] = ()) -> bool:
    """True for greetings, thanks and reactions with no fact in them ("Wow, that's great!").

    Short sentences that open with a greeting or interjection count as small talk even with
    one unknown word in them, which is usually a nickname ("Hey Mel!").
    """
    names = list(names)
    substance = substantive_words(sentence, names)
    if not substance:
        return True
    tokens = tokenize(sentence)
    opens_with_small_talk = bool(tokens) and tokens[0] in SMALL_TALK_WORDS
    return opens_with_small_talk and len(tokens) <= 3 and len(substance) <= 1


def split_sentences(text: str) -> list[str]:
    """Split chat text into sentences.

    Newlines separate items; Markdown list markers and emphasis are dropped; "Dr.", "e.g.",
    initials and decimals do not end a sentence; "!!", "?!" and "..." do when followed by a
    capitalised word; emojis stay with the sentence they close. Pieces without any letter or
    digit (a lone emoji, "...") are dropped.
    """
    sentences: list[str] = []
    for raw_line in normalise_apostrophes(text).splitlines():
        line = _EMPHASIS_RE.sub("", _LIST_MARKER_RE.sub("", raw_line)).strip()
        if line:
            sentences.extend(_split_line(line))
    return [s for s in sentences if _HAS_WORD_RE.search(s)]


def _split_line(line: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for match in _TERMINATOR_RE.finditer(line):
        group = next(g for g in ("end", "bang", "emoji") if match.group(g))
        cut = match.end(group)
        if match.group("end") and _ends_with_abbreviation(line[start:cut]):
            continue
        if _is_ellipsis(match.group("end")) and re.match(r"\s*I\b", line[match.end() :]):
            continue  # "Well... I guess so" trails off, it does not end
        piece = line[start:cut].strip()
        if piece:
            pieces.append(piece)
        start = match.end()
    tail = line[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


def _is_ellipsis(terminator: str | None) -> bool:
    return bool(terminator) and terminator.rstrip("'\")]").endswith(("..", "…"))


def _ends_with_abbreviation(piece: str) -> bool:
    stripped = piece.rstrip("'\")]").rstrip()
    if not stripped.endswith(".") or stripped.endswith(".."):
        return False
    last_word = stripped.rsplit(maxsplit=1)[-1].lstrip("(\"'").rstrip(".").lower()
    if last_word in _ABBREVIATIONS:
        return True
    # An initial ("J. K. Rowling") or a dotted acronym ("U.S.").
    return bool(re.fullmatch(r"(?:[a-z]\.)*[a-z]", last_word))


def extract_keywords(
    text: str, max_keywords: int = 8, known_names: Iterable[str] = ()
) -> list[str]:
    """Keywords in order of importance: names (capitalised, possibly multiword, e.g.
    "New York"), then noun-like content words, then verb/adverb-like ones (-ed, -ly).
    No stopwords, no numbers, no duplicates (case-insensitive), stable for a given text.
    Names keep their case; other words are lowercase.
    """
    names = proper_names(text, known_names)
    seen = {t for name in names for t in tokenize(name)}
    nounish: list[str] = []
    other: list[str] = []
    for word in _keyword_candidates(text):
        if word in seen or len(word) < 3 or not any(c.isalpha() for c in word):
            continue  # numbers and ranges ("20-30") are not keywords
        seen.add(word)
        if word in _GENERIC_WORDS or word in SMALL_TALK_WORDS:
            continue
        if "'" in word:
            continue  # contractions ("how'd", "what'll") are never keywords
        if word.endswith(("ly", "ed")) or word in _CALENDAR_WORDS:
            other.append(word)
        else:
            nounish.append(word)
    return (names + nounish + other)[:max_keywords]


_COMPOUND_RE = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


def _keyword_candidates(text: str) -> list[str]:
    """Like content_words, but hyphenated compounds stay whole ("dairy-free", "self-care")."""
    words = _COMPOUND_RE.findall(normalise_apostrophes(text).lower())
    words = [w[:-2] if w.endswith("'s") else w for w in words]
    return [w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


_CALENDAR_WORDS = _word_set(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december"""
)
_SENTENCE_END_RE = re.compile(r"[.!?…]+['\")\]]*$")


def proper_names(text: str, known_names: Iterable[str] = ()) -> list[str]:
    """Capitalised word sequences that look like names, in order of first appearance.

    A capitalised word at the start of a sentence is not trusted on its own (it may be any
    word): it counts when it is a known name, an acronym, or appears capitalised
    mid-sentence elsewhere in the text. Common words opening a sentence ("Yesterday
    Caroline ...") are trimmed off. Weekday and month names are not names here.
    """
    known = {n.lower(): n for n in known_names if n}
    runs = _capitalised_runs(normalise_apostrophes(text))
    mid_sentence = {w.lower() for run, initial in runs for w in run[1 if initial else 0 :]}
    names: list[str] = []
    seen: set[str] = set()
    for run, opens_sentence in runs:
        words = list(run)
        initial = opens_sentence
        if initial and len(words) > 1 and _drop_opening_word(words, known, mid_sentence):
            words = words[1:]
            initial = False
        while words and words[-1] in _NAME_JOINERS:  # "Bank of" -> "Bank"
            words.pop()
        if not words:
            continue
        key = " ".join(words).lower()
        if key in seen:
            continue
        if initial and len(words) == 1 and not _trusted_single(words[0], known, mid_sentence):
            continue
        seen.add(key)
        names.append(known.get(key, " ".join(words)))
    return names


def _capitalised_runs(text: str) -> list[tuple[list[str], bool]]:
    """Runs of capitalised words (joined by "of", "the", ...) and whether each opens a sentence."""
    runs: list[tuple[list[str], bool]] = []
    current: list[str] = []
    current_initial = False
    sentence_start = True
    for raw in text.split():
        word = raw.strip("\"'()[]{},;:!?…*").removesuffix("'s").rstrip(".")
        ends_sentence = bool(_SENTENCE_END_RE.search(raw)) and not _ends_with_abbreviation(raw)
        if current and raw.startswith(("(", "[", '"')):  # "Interval Training (HIIT)"
            runs.append((current, current_initial))
            current = []
        if _looks_capitalised(word):
            if not current:
                current_initial = sentence_start
            current.append(word)
        elif current and word.lower() in _NAME_JOINERS and raw == word:
            current.append(word.lower())
        elif current:
            runs.append((current, current_initial))
            current = []
        # Punctuation after a word ends the run ("Paris, London" are two names), and so does
        # a possessive ("John's NYC trip").
        ends_run = raw.rstrip("'\")]").endswith((",", ";", ":", ".", "!", "?", "…"))
        if current and (ends_run or raw.rstrip(",;:.!?…").endswith("'s")):
            runs.append((current, current_initial))
            current = []
        # After a colon a capital letter is as uninformative as at a sentence start.
        sentence_start = ends_sentence or raw.endswith(":")
    if current:
        runs.append((current, current_initial))
    return runs


def _looks_capitalised(word: str) -> bool:
    if not word or not word[0].isupper() or _CAPITALISED_RE.match(word) is None:
        return False
    key = word.lower()
    if key in _NOT_NAMES or key in _CALENDAR_WORDS:
        return False
    return key not in STOPWORDS  # "THE", "US" shouted or not, are function words here


def _drop_opening_word(words: list[str], known: dict[str, str], mid_sentence: set[str]) -> bool:
    """Whether a sentence's capitalised first word is just a word before a name
    ("Yesterday Caroline", "Thanks Mel", "Blessed Maria") rather than part of it ("New York")."""
    first = words[0].lower()
    if first in known or first in mid_sentence:
        return False
    if words[1].lower() in known or (len(words[1]) > 1 and words[1].isupper()):
        return True  # "Blessed Maria", "Incorporate HIIT"
    return first in STOPWORDS or first in SMALL_TALK_WORDS or first in _CALENDAR_WORDS


def _trusted_single(word: str, known: dict[str, str], mid_sentence: set[str]) -> bool:
    key = word.lower()
    return key in known or key in mid_sentence or (len(word) > 1 and word.isupper())


def detect_topics(text: str, max_topics: int = 3) -> list[str]:
    """Coarse topic labels from the lexicon, most supported first; ["general"] if none."""
    tokens = tokenize(text)
    counts: dict[str, int] = {}
    for token in tokens:
        stem = token[:-1] if token.endswith("s") and len(token) > 3 else token
        for label, words in TOPIC_LEXICON.items():
            if token in words or stem in words:
                counts[label] = counts.get(label, 0) + 1
    if not counts:
        return [GENERAL_TOPIC]
    ranked = sorted(counts, key=lambda label: (-counts[label], TOPIC_LABELS.index(label)))
    return ranked[:max_topics]


def normalise_topic(label: str) -> str | None:
    """Map a free topic label (e.g. from an LLM) onto TOPIC_LABELS; None if no match."""
    key = label.strip().lower()
    if key in TOPIC_LABELS:
        return key
    for word in re.split(r"[^a-z]+", key):
        for known, words in TOPIC_LEXICON.items():
            if word == known or word in words:
                return known
    return None
