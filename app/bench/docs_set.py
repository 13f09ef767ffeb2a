"""Questions for `bench --docs` whose answers sit on known pages of Python's own documentation
(Debian's python3-doc: HTML, one page a module or topic). Written for this benchmark, in the
words a person asks with, not the page's own; any of the listed pages counts as the answer."""

from __future__ import annotations

QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("What does functools.lru_cache do when maxsize is None?", ("library/functools.html",)),
    ("How do I sort a list of dictionaries by one of their keys?", ("howto/sorting.html",)),
    ("What is the difference between a shallow copy and a deep copy?", ("library/copy.html",)),
    ("How do I read a CSV file with a header row into dictionaries?", ("library/csv.html",)),
    ("How do I give my command line tool subcommands with their own options?", ("library/argparse.html",)),
    ("How do I start another program and capture what it prints?", ("library/subprocess.html",)),
    ("What does the := walrus operator do?", ("reference/expressions.html", "whatsnew/3.8.html")),
    ("How do I run several coroutines concurrently and wait for all of their results?",
     ("library/asyncio-task.html",)),
    ("How do I format a date and time as text with strftime codes?",
     ("library/datetime.html", "library/time.html")),
    ("How do I compile a regular expression and find every match in a string?",
     ("library/re.html", "howto/regex.html")),
    ("How can I turn a Python dictionary into a JSON string?", ("library/json.html",)),
    ("What is the global interpreter lock?", ("glossary.html", "c-api/init.html")),
    ("How do I create a virtual environment for a project?", ("library/venv.html", "tutorial/venv.html")),
    ("How do I count how many times each item appears in a list?", ("library/collections.html",)),
    ("How does the dataclass decorator generate __init__ and __repr__?", ("library/dataclasses.html",)),
    ("How do I write log messages to a file?",
     ("howto/logging.html", "library/logging.html", "howto/logging-cookbook.html")),
    ("How do I list every file in a directory tree recursively?",
     ("library/os.html", "library/pathlib.html")),
    ("How do I create a temporary file that is removed automatically?", ("library/tempfile.html",)),
    ("How do I fetch a web page over HTTP with urllib?",
     ("library/urllib.request.html", "howto/urllib2.html")),
    ("How do descriptors work and when is __get__ called?",
     ("howto/descriptor.html", "reference/datamodel.html")),
    ("How do I run functions in parallel with a pool of worker threads?",
     ("library/concurrent.futures.html",)),
    ("How do I draw random numbers from a normal (Gaussian) distribution?", ("library/random.html",)),
    ("How do I declare an abstract base class with abstract methods?", ("library/abc.html",)),
    ("What does the built-in enumerate return?", ("library/functions.html",)),
    ("How do I time how long a small snippet of code takes to run?", ("library/timeit.html",)),
    ("When does the else clause of a try statement run?",
     ("tutorial/errors.html", "reference/compound_stmts.html")),
    ("How do I save an object to a file with pickle and load it back?", ("library/pickle.html",)),
    ("How do I annotate a parameter that accepts any callable?", ("library/typing.html",)),
    ("How do I unpack the contents of a zip archive?", ("library/zipfile.html", "library/shutil.html")),
    ("How do I compute the SHA-256 hash of a file?", ("library/hashlib.html",)),
    ("How do I store data in an SQLite database from Python?", ("library/sqlite3.html",)),
    ("How do I write a unit test that checks an exception is raised?", ("library/unittest.html",)),
)


def same_page(path: str) -> str:
    """A page and its reStructuredText source (_sources/x.rst.txt, shipped beside it) are one page."""
    if path.startswith("_sources/") and path.endswith(".rst.txt"):
        return path[len("_sources/"):-len(".rst.txt")] + ".html"
    return path
