"""A synthetic LongMemEval-S-sized dataset, generated (never copied) in the LongMemEval schema.

Like LongMemEval-S, every question has its own haystack of ~50 timestamped user/assistant
sessions (~115k tokens), most of them filler drawn from one shared pool of sessions (so the
same session recurs across questions' haystacks), plus one to three evidence sessions of its
own whose answer-bearing turns carry ``has_answer: true``. Question types follow LongMemEval's
(single-session-user/-assistant/-preference, multi-session, knowledge-update,
temporal-reasoning, and ``_abs`` abstention). Text is templated from small vocabularies: it is
sized and shaped like the real data, not meant to be hard.

    python benchmarks/synth_longmemeval.py --questions 500 --out /tmp/lme_s_synth.json
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

PEOPLE = ["Maya", "Jonas", "Lena", "Priya", "Tomas", "Aiko", "Omar", "Sofia", "Ravi", "Greta"]
HOBBIES = [
    "pottery",
    "bouldering",
    "salsa",
    "chess",
    "sourdough baking",
    "birdwatching",
    "watercolour",
    "kayaking",
    "jazz piano",
    "urban sketching",
    "archery",
    "beekeeping",
]
PLACES = [
    "Lisbon",
    "Kyoto",
    "Denver",
    "Tallinn",
    "Oaxaca",
    "Galway",
    "Hobart",
    "Porto",
    "Ljubljana",
    "Quebec City",
    "Bergen",
    "Valparaiso",
]
ITEMS = [
    "a standing desk",
    "a road bike",
    "noise-cancelling headphones",
    "a cast-iron pan",
    "a film camera",
    "a telescope",
    "hiking boots",
    "an e-reader",
    "a espresso machine",
    "a sewing machine",
    "a drone",
    "a kayak paddle",
]
TOPICS = [
    "budget travel",
    "meal prep",
    "sleep hygiene",
    "learning Spanish",
    "home workouts",
    "python scripting",
    "indoor plants",
    "time management",
    "car maintenance",
    "saving for retirement",
    "photography basics",
    "job interviews",
    "gardening",
    "public speaking",
    "writing a novel",
    "moving apartments",
]
# Assistant sentences are composed from parts, so a long reply rarely repeats a sentence
# verbatim (real replies do not): 20 x 16 x 20 x 16 combinations per topic.
OPENERS = [
    "A good first step is to",
    "Many people find it helps to",
    "You could",
    "Try to",
    "It is worth trying to",
    "Consider whether you can",
    "One option is to",
    "If time is short,",
    "Early on, it pays to",
    "A simple habit is to",
    "Experts suggest you",
    "On busy weeks, just",
    "Some beginners prefer to",
    "It often works to",
    "To stay motivated,",
    "Before spending money,",
    "As a rule of thumb,",
    "When progress stalls,",
    "For a gentle start,",
    "In the long run, it helps to",
]
ACTIONS = [
    "set a small goal for",
    "keep a short log about",
    "read one beginner guide on",
    "schedule two sessions a week for",
    "ask a friend to join you in",
    "compare three options for",
    "watch a short tutorial about",
    "join a local group for",
    "write down your reasons for",
    "track your spending on",
    "limit the first week of",
    "plan a weekend around",
    "review your notes on",
    "break into small steps",
    "budget an hour on Sundays for",
    "find a mentor for",
]
DETAILS = [
    "before dinner",
    "on your commute",
    "every other morning",
    "after work",
    "with a timer set to twenty minutes",
    "using a paper notebook",
    "with a cheap starter kit",
    "at the library",
    "during lunch breaks",
    "with a free app",
    "on rainy days",
    "with a checklist",
    "before checking email",
    "with one clear rule",
    "outdoors",
    "with a weekly review",
    "in short bursts",
    "with a budget cap",
    "at a fixed time",
    "alongside an existing routine",
]
REASONS = [
    "so it becomes automatic",
    "because consistency beats intensity",
    "since results show after a few weeks",
    "to avoid burning out early",
    "which keeps costs predictable",
    "so you can see what works",
    "to keep it fun",
    "because small wins add up",
    "so setbacks feel smaller",
    "to build confidence",
    "which makes the next step obvious",
    "to stay accountable",
    "so the habit survives busy weeks",
    "to catch mistakes early",
    "to keep momentum",
    "which many learners recommend",
]
USER_FILLER = [
    "I have been thinking about {topic} a lot lately and I am not sure where to begin.",
    "Can you give me some practical tips on {topic}?",
    "Last week I tried a few things for {topic} but nothing really stuck.",
    "My schedule is pretty busy, so I need something that fits into short evenings.",
    "What would you recommend for someone who is a complete beginner at {topic}?",
    "Thanks, that is helpful. How should I measure whether I am making progress?",
]

# (question type, fact the user states, question, answer) — filled from the vocabularies.
EVIDENCE = [
    (
        "single-session-user",
        "By the way, I recently started taking {hobby} classes on Tuesdays.",
        "What classes did I start taking recently?",
        "{hobby}",
    ),
    (
        "single-session-user",
        "I finally bought {item} last weekend, it was on sale.",
        "What did I buy last weekend?",
        "{item}",
    ),
    (
        "single-session-preference",
        "I really prefer trips to quiet places like {place} over big resorts.",
        "Which kind of destination do I prefer, and which place did I name?",
        "{place}",
    ),
    (
        "multi-session",
        "My sister {person} is moving to {place} next month.",
        "Where is my sister moving?",
        "{place}",
    ),
    (
        "knowledge-update",
        "I now commute by bike instead of taking the bus since I bought {item}.",
        "How do I commute now?",
        "by bike",
    ),
    (
        "temporal-reasoning",
        "I went on a trip to {place} with {person} three weeks ago.",
        "Who did I travel to {place} with?",
        "{person}",
    ),
]


def lme_date(moment: datetime) -> str:
    """LongMemEval's date format, e.g. ``2023/05/20 (Sat) 02:21``."""
    return moment.strftime("%Y/%m/%d (%a) %H:%M")


def _fill(template: str, rng: random.Random, topic: str, **slots: str) -> str:
    values = {
        "topic": topic,
        "hobby": rng.choice(HOBBIES),
        "place": rng.choice(PLACES),
        "item": rng.choice(ITEMS),
        "person": rng.choice(PEOPLE),
        **slots,
    }
    return template.format(**values)


def advice_sentence(rng: random.Random, topic: str) -> str:
    return (
        f"{rng.choice(OPENERS)} {rng.choice(ACTIONS)} {topic} "
        f"{rng.choice(DETAILS)}, {rng.choice(REASONS)}."
    )


def filler_session(rng: random.Random, turns: int, assistant_sentences: int) -> list[dict]:
    """A user/assistant chat about one everyday topic; assistant turns are the long ones."""
    topic = rng.choice(TOPICS)
    session = []
    for n in range(turns):
        if n % 2 == 0:
            text = " ".join(_fill(rng.choice(USER_FILLER), rng, topic) for _ in range(2))
            session.append({"role": "user", "content": text})
        else:
            text = " ".join(advice_sentence(rng, topic) for _ in range(assistant_sentences))
            session.append({"role": "assistant", "content": text})
    return session


def evidence_session(
    rng: random.Random, fact: str, turns: int, assistant_sentences: int
) -> list[dict]:
    session = filler_session(rng, turns, assistant_sentences)
    where = 2 * rng.randrange(max(1, turns // 2))  # a user turn
    session[where] = {"role": "user", "content": fact, "has_answer": True}
    return session


def generate(
    questions: int = 500,
    sessions_per_haystack: int = 50,
    turns_per_session: int = 10,
    assistant_sentences: int = 17,
    pool_sessions: int = 2000,
    seed: int = 0,
) -> list[dict]:
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, 9, 0)
    pool = [
        (f"pool_{n}", filler_session(rng, turns_per_session, assistant_sentences))
        for n in range(pool_sessions)
    ]
    items = []
    for q in range(questions):
        qtype, fact_t, question_t, answer_t = EVIDENCE[q % len(EVIDENCE)]
        slots = {
            "hobby": rng.choice(HOBBIES),
            "place": rng.choice(PLACES),
            "item": rng.choice(ITEMS),
            "person": rng.choice(PEOPLE),
        }
        n_evidence = 2 if qtype in ("multi-session", "knowledge-update") else 1
        fact = fact_t.format(**slots)
        evidence = [
            (
                f"q{q}_answer_{e}",
                evidence_session(rng, fact, turns_per_session, assistant_sentences),
            )
            for e in range(n_evidence)
        ]
        filler = rng.sample(pool, k=min(len(pool), sessions_per_haystack - n_evidence))
        sessions = filler + evidence
        rng.shuffle(sessions)
        moments = sorted(
            start + timedelta(days=rng.randrange(0, 400), minutes=rng.randrange(0, 1440))
            for _ in sessions
        )
        abstention = q % 30 == 29  # LongMemEval-S has 30 abstention questions in 500
        question_id = f"synth_{q:04d}" + ("_abs" if abstention else "")
        items.append(
            {
                "question_id": question_id,
                "question_type": qtype,
                "question": question_t.format(**slots),
                "answer": answer_t.format(**slots),
                "question_date": lme_date(moments[-1] + timedelta(days=3)),
                "haystack_session_ids": [sid for sid, _ in sessions],
                "haystack_dates": [lme_date(m) for m in moments],
                "haystack_sessions": [turns for _, turns in sessions],
                "answer_session_ids": [sid for sid, _ in evidence],
            }
        )
    return items


def size_stats(items: list[dict]) -> dict:
    """Sessions, turns and approximate tokens (words x 1.3) per haystack, and pool sharing."""
    words = [
        sum(len(t["content"].split()) for s in it["haystack_sessions"] for t in s) for it in items
    ]
    turns = [sum(len(s) for s in it["haystack_sessions"]) for it in items]
    session_ids = [sid for it in items for sid in it["haystack_session_ids"]]
    return {
        "questions": len(items),
        "sessions_per_haystack": sum(len(it["haystack_sessions"]) for it in items) / len(items),
        "turns_per_haystack": sum(turns) / len(items),
        "approx_tokens_per_haystack": 1.3 * sum(words) / len(items),
        "session_occurrences": len(session_ids),
        "distinct_sessions": len(set(session_ids)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    items = generate(args.questions, args.sessions)
    Path(args.out).write_text(json.dumps(items))
    print(json.dumps(size_stats(items), indent=2))


if __name__ == "__main__":
    main()
