"""The everyday prompts `llamadesk bench --quality` judges replies on, and how it judges them.

A base model (no chat template) answers a plain transcript, and its typical
failures are mechanical enough to detect without a judge model: saying
nothing, echoing the question, writing the next speaker's turn itself, or
copying a run of words from earlier in the conversation. The set covers
questions, instructions, code, writing and follow-ups, so a change to the
prompt format or the samplers is judged on the shape of real use rather than
on one example.
"""

from __future__ import annotations

import re

PROMPTS = (
    "What is the capital of France?",
    "Why is the sky blue?",
    "How many days are there in a leap year?",
    "What does a thermometer measure?",
    "Who wrote Romeo and Juliet?",
    "What is the boiling point of water in Celsius?",
    "Explain what photosynthesis is in one sentence.",
    "What is the difference between weather and climate?",
    "How do I boil an egg?",
    "Give me three tips for sleeping better.",
    "What should I pack for a weekend hiking trip?",
    "How can I make my tomato plants grow better?",
    "Suggest a name for a small bakery.",
    "What is a good breakfast for a busy morning?",
    "How do I remove a coffee stain from a shirt?",
    "Translate 'good morning' into Spanish.",
    "Summarize the story of Cinderella in two sentences.",
    "List four fruits that are red.",
    "Rewrite this sentence more politely: Give me the report now.",
    "Correct the grammar: She don't like apples.",
    "Write a haiku about autumn leaves.",
    "Write a short poem about the sea.",
    "Write a two-sentence story about a lost cat.",
    "Write a birthday message for my grandmother.",
    "Describe a sunset in three sentences.",
    "Write a Python function that adds two numbers.",
    "How do I reverse a list in Python?",
    "What does the HTML tag <p> do?",
    "Write a SQL query that selects all rows from a table named users.",
    "What is a variable in programming?",
    "Explain what a for loop does.",
    "What is 12 times 7?",
    "If I have 3 apples and eat one, how many are left?",
    "Convert 5 kilometres to metres.",
    "Is a tomato a fruit or a vegetable?",
    "What are the three primary colours?",
    "Why do cats purr?",
    "How do airplanes stay in the air?",
    "What is the tallest mountain in the world?",
    "Give me a fun fact about octopuses.",
    "What is a good way to learn a new language?",
    "Recommend a board game for a family evening.",
)

# Two-turn chats: the second question follows the first reply, as in the window.
CHATS = (
    ("What is the capital of Italy?", "What is a famous food from there?"),
    ("Write a sentence about a bicycle.", "Now write a short story about a dragon."),
    ("Name a planet in our solar system.", "How far is it from the Sun?"),
    ("What is a healthy snack?", "Why is it healthy?"),
    ("How do I make tea?", "And how do I make coffee?"),
    ("Tell me a joke about cats.", "Tell me one about dogs."),
    ("What is Python?", "Show me a hello world program in it."),
    ("Who painted the Mona Lisa?", "When was it painted?"),
    ("Give me a word that rhymes with cat.", "Use it in a sentence."),
    ("What is the largest ocean?", "What animals live there?"),
    ("Suggest a name for a puppy.", "Suggest one for a kitten."),
    ("What is 15 plus 27?", "Now double it."),
    ("Describe a forest in one sentence.", "Describe a desert in one sentence."),
    ("What language is spoken in Brazil?", "How do you say thank you in it?"),
    ("What is rain made of?", "Why does it fall?"),
    ("Write a short poem about winter.", "Write one about summer."),
    ("What is a noun?", "Give me three examples."),
    ("Recommend a book for a child.", "Why would they like it?"),
    ("What time of year do leaves fall?", "Why do they change colour?"),
    ("How many legs does a spider have?", "And an insect?"),
    ("What is the speed of light?", "Can anything go faster?"),
)

KINDS = ("empty", "echo", "role_marker", "copy", "ok")
COPY_RUN = 8  # words in a row taken from earlier text that count as copying

# A line that starts a speaker's turn: the base model inventing the next speaker.
ROLE_LINE = re.compile(
    r"(?im)^\s*(user|assistant|student|teacher|human|ai|bot|system|question|answer|q|a|me|you|"
    r"customer|agent|interviewer|narrator)\s*:")
_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _contains_run(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def _shares_run(a: list[str], b: list[str], n: int) -> bool:
    """Whether some n consecutive words of `a` also stand consecutively in `b`."""
    if len(a) < n or len(b) < n:
        return False
    grams = {tuple(b[i:i + n]) for i in range(len(b) - n + 1)}
    return any(tuple(a[i:i + n]) in grams for i in range(len(a) - n + 1))


def classify(reply: str, question: str, earlier: tuple[str, ...] = ()) -> str:
    """One kind per reply, the worst first: empty, echo, role_marker, copy, ok.

    `earlier` is every text the model saw before the question (earlier turns,
    and any example exchanges of the prompt format): copying 8 words in a row
    from any of them counts.
    """
    if not reply.strip():
        return "empty"
    r, q = words(reply), words(question)
    if (len(q) >= 3 and _contains_run(r, q)) or (q and r[:len(q)] == q):
        return "echo"
    if ROLE_LINE.search(reply):
        return "role_marker"
    if any(_shares_run(r, words(t), COPY_RUN) for t in earlier):
        return "copy"
    return "ok"
