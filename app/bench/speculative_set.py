"""The prompts of `bench --speculative`: what users edit every day, and free chat.

Editing replies repeat much of their prompt (a text rewritten with a few
changes, typos fixed, a list reformatted, code edited), which is what prompt
lookup guesses from; free chat repeats little, so there speculation must step
aside and cost nothing.
"""

from __future__ import annotations

_LETTER = ("Dear Ms. Patel, thank you for your letter of 12 March. We have checked the invoice and the "
           "amount due is 240 euros, not 420 euros as written. Please pay by the end of the month. "
           "Kind regards, Tom Berger")
_TYPOS = ("The quick brwon fox jumsp over the lazy dog. It was a sunny day and the birds were "
          "singign in the trees. Evrything was calm in the vilage.")
_CODE = ("def total(items):\n    result = 0\n    for item in items:\n        result = result + item.price\n"
         "    return result\n\n\ndef count(items):\n    n = 0\n    for item in items:\n        n = n + 1\n"
         "    return n\n")
_LIST = "apples: 3, pears: 5, plums: 12, cherries: 40, lemons: 2, limes: 7, oranges: 9"
_JSON = ('{"name": "Ada Lovelace", "born": 1815, "field": "mathematics", "city": "London", '
         '"known_for": "the first computer program"}')
_MINUTES = ("Meeting notes, 4 June. Present: Anna, Ben, Chloe. Anna will send the budget by Friday. "
            "Ben will book the room for the workshop. Chloe will write to the speakers. Next meeting on "
            "11 June at 10:00.")

EDITING = (
    f"Rewrite this letter with the amount changed to 260 euros, keeping everything else:\n\n{_LETTER}",
    f"Fix the spelling mistakes in this text and write it out in full:\n\n{_TYPOS}",
    f"Rename the variable `result` to `acc` in this code and show the whole code:\n\n{_CODE}",
    f"Write this list one item per line, as 'fruit - number':\n\n{_LIST}",
    f"Repeat this JSON with the city changed to Paris:\n\n{_JSON}",
    f"Copy these notes, replacing Ben with Dan:\n\n{_MINUTES}",
    f"Add type hints to this code and write it out again:\n\n{_CODE}",
    f"Write this text again with every sentence on its own line:\n\n{_TYPOS}",
)

CHAT = (
    "Tell me a short story about a lighthouse keeper.",
    "What should I cook for dinner tonight?",
    "Why is the sky blue?",
    "Give me three ideas for a birthday present.",
    "How do bees make honey?",
    "Write a poem about the sea.",
    "What is a good way to learn a new language?",
    "Describe your perfect weekend.",
)
