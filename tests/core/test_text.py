import pytest

from mera_pipelines.core.text import (
    GENERAL_TOPIC,
    STOPWORDS,
    TOPIC_LABELS,
    content_words,
    detect_topics,
    extract_keywords,
    is_small_talk,
    normalise_topic,
    proper_names,
    split_sentences,
    tokenize,
)

# ---- tokens -------------------------------------------------------------------------------


def test_tokenize_lowercases_keeps_contractions_drops_possessive():
    assert tokenize("Maya's dog DOESN'T bark, 3 times!") == [
        "maya",
        "dog",
        "doesn't",
        "bark",
        "3",
        "times",
    ]


def test_tokenize_curly_apostrophes_and_hyphens():
    assert tokenize("I’m into self-care") == ["i'm", "into", "self", "care"]


def test_tokenize_handles_non_ascii_letters_and_emojis():
    assert tokenize("Café in Zürich 😊") == ["café", "in", "zürich"]


def test_stopwords_are_lowercase_function_words():
    assert {"the", "and", "i'm", "you"} <= STOPWORDS
    assert "painting" not in STOPWORDS
    assert all(w == w.lower() for w in STOPWORDS)


def test_content_words_drop_stopwords_keep_order_and_repeats():
    assert content_words("I painted the lake and then the lake at dawn") == [
        "painted",
        "lake",
        "lake",
        "dawn",
    ]


# ---- sentences ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I saw Dr. Smith today. He was kind.", ["I saw Dr. Smith today.", "He was kind."]),
        (
            "Bring snacks, e.g. chips. Then we go.",
            ["Bring snacks, e.g. chips.", "Then we go."],
        ),
        ("It was great!! We loved it", ["It was great!!", "We loved it"]),
        ("Wait... what? Are you sure?!", ["Wait... what?", "Are you sure?!"]),
        ("Well... I guess so. Fine.", ["Well... I guess so.", "Fine."]),
        ("Really?? cool, tell me more", ["Really??", "cool, tell me more"]),
        ("no punctuation at all here", ["no punctuation at all here"]),
        ("I love it 😍 My kids too", ["I love it 😍", "My kids too"]),
        ("So happy! 😊😊 See you soon.", ["So happy! 😊😊", "See you soon."]),
        (
            "It cost 3.5 dollars. J. K. Rowling wrote it.",
            ["It cost 3.5 dollars.", "J. K. Rowling wrote it."],
        ),
        ("She moved to the U.S. in May.", ["She moved to the U.S. in May."]),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_markdown_lists_and_newlines():
    text = "Here are tips:\n\n1. **Cardio**: run daily.\n2. Rest well.\n- Eat greens\n* Sleep"
    assert split_sentences(text) == [
        "Here are tips:",
        "Cardio: run daily.",
        "Rest well.",
        "Eat greens",
        "Sleep",
    ]


def test_split_sentences_drops_pieces_without_words():
    assert split_sentences("...") == []
    assert split_sentences("😊") == []
    assert split_sentences("   ") == []
    assert split_sentences("Nice! 👍") == ["Nice! 👍"]


# ---- small talk -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "Hi!",
        "Thanks!",
        "Haha",
        "Wow, that's great!",
        "How are you?",
        "Hey Mel!",
        "Good to see you!",
        "Thanks, Caroline!",
        "I love it!",
        "What's up with you? Anything new?",
        "Sounds great, see you soon?",
        "That's sweet, Mel!",
    ],
)
def test_small_talk(sentence):
    assert is_small_talk(sentence, ["Caroline", "Melanie"])


@pytest.mark.parametrize(
    "sentence",
    [
        "I'm swamped with the kids & work.",
        "Congrats on the new job!",
        "I went to a support group yesterday.",
        "Pottery class was fun",
        "Caroline adopted a dog.",
    ],
)
def test_not_small_talk(sentence):
    assert not is_small_talk(sentence, ["Caroline", "Melanie"])


# ---- keywords -------------------------------------------------------------------------------


def test_keywords_names_first_then_content_words():
    keywords = extract_keywords(
        "Yesterday Caroline went to New York with the Bank of America team.",
        known_names=["Caroline"],
    )
    assert keywords == ["Caroline", "New York", "Bank of America", "team"]


def test_keywords_no_stopwords_no_duplicates_no_numbers_and_capped():
    keywords = extract_keywords(
        "The painting and the painting and THE Painting cost 300 dollars at the gallery "
        "with frames, brushes, canvases, easels, paints and 20-30 lamps",
        max_keywords=5,
    )
    assert len(keywords) == 5
    lowered = [k.lower() for k in keywords]
    assert len(set(lowered)) == len(lowered)
    assert not set(lowered) & STOPWORDS
    assert "300" not in lowered and "20-30" not in lowered
    assert lowered[0] == "painting"


def test_keywords_order_is_stable_and_deterministic():
    text = "Melanie ran a charity race for mental health in Boston with her kids."
    first = extract_keywords(text, known_names=["Melanie"])
    assert first == extract_keywords(text, known_names=["Melanie"])
    assert first[:2] == ["Melanie", "Boston"]
    assert first.index("charity") < first.index("race") < first.index("kids")


def test_keywords_keep_acronyms_and_hyphenated_words():
    keywords = extract_keywords("I went to a LGBTQ support group about self-care.")
    assert keywords[0] == "LGBTQ"
    assert "self-care" in keywords
    assert "I" not in keywords


def test_keywords_skip_generic_words_and_contractions():
    keywords = extract_keywords("I really think that it's a great thing, you know, haha")
    assert keywords == []


def test_proper_names_sentence_initial_words_need_support():
    # "Went" opens a sentence and is not seen capitalised elsewhere: not a name.
    assert proper_names("Went to Paris. Loved it.") == ["Paris"]
    # A name seen mid-sentence elsewhere is trusted at a sentence start too.
    assert proper_names("Luna is sweet. I adore Luna.") == ["Luna"]
    # Words before a known name are trimmed; possessives end a name.
    assert proper_names("Blessed Maria went out.", ["Maria"]) == ["Maria"]
    assert proper_names("On John's NYC trip", ["John"]) == ["John", "NYC"]
    # Separate names stay separate.
    assert proper_names("We saw Lake Tahoe, Paris and London.") == [
        "Lake Tahoe",
        "Paris",
        "London",
    ]


def test_proper_names_skip_weekdays_and_pronoun_i():
    assert proper_names("I met Sam on Saturday in May.") == ["Sam"]


# ---- topics -------------------------------------------------------------------------------


def test_detect_topics_several_labels_most_supported_first():
    topics = detect_topics("My daughter and my son adopted a puppy and we walk the dog daily")
    assert topics[:2] == ["family", "pets"]


def test_detect_topics_general_fallback():
    assert detect_topics("That is so true.") == [GENERAL_TOPIC]


def test_detect_topics_plural_forms():
    assert "hobbies" in detect_topics("She collects paintings")


def test_normalise_topic_maps_free_labels():
    assert normalise_topic("Pets") == "pets"
    assert normalise_topic("career/work") == "work"
    assert normalise_topic("painting") == "hobbies"
    assert normalise_topic("quantum chromodynamics") is None
    assert GENERAL_TOPIC in TOPIC_LABELS
