"""The repository stands on its own: code and docs cite docs/design.md, and only sections it has.

Every text file under ``kafkafs/``, ``tests/``, ``docs/``, ``bench/``, ``scripts/`` and
``README.md`` is read (binary files -- test corpora, built extensions -- are skipped):

* no file names a design document outside the repository: no ``DESIGN §N``, no
  ``DESIGN.md`` (any spelling but ``design.md``, the name of docs/design.md itself), no
  ``../shared``, ``/work/shared``, ``KAFKA_FORMAT.md`` or ``SPARK_NOTES.md``;
* every ``docs/design.md §N`` (or ``design.md §N.M``, and each further ``§`` of a list such
  as ``docs/design.md §1.2, §3.4``) names a section docs/design.md has, and so does every
  bare ``§N`` inside docs/design.md itself;
* docs/design.md numbers its sections ``## N.`` from 1 and its subsections ``### N.M``
  from N.1, without gaps, so a citation keeps its meaning as sections are added at the end.
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DESIGN = os.path.join(ROOT, "docs", "design.md")
SCANNED = ("kafkafs", "tests", "docs", "bench", "scripts", "README.md")
SKIP_DIRS = {"__pycache__", ".pytest_cache", "corpus"}

# names of documents outside the repository (the design notes it was started from)
FOREIGN = [
    (re.compile(r"DESIGN\s*§"), "DESIGN §"),
    (re.compile(r"\.\./shared"), "../shared"),
    (re.compile(r"/work/shared"), "/work/shared"),
    (re.compile(r"KAFKA_FORMAT\.md"), "KAFKA_FORMAT.md"),
    (re.compile(r"SPARK_NOTES\.md"), "SPARK_NOTES.md"),
]
DESIGN_NAME = re.compile(r"design\.md", re.IGNORECASE)

SELF = os.path.join("tests", "test_docs_refs.py")  # names them to look for them

# C sources this test cannot have fixed in the same change (the C extension is edited
# elsewhere): the foreign names they may still hold. Drop an entry once its file is clean.
PENDING: dict = {}  # path -> names it may still mention (none left)

SECTION = r"§\d+(?:\.\d+)*"
CITATION = re.compile(r"design\.md\s+(" + SECTION + r"(?:\s*(?:,|and|or)\s*" + SECTION + r")*)")
HEADING = re.compile(r"^(#{2,3})\s+(\d+)\.(\d+)?\s", re.MULTILINE)


def scanned_files(root: str = ROOT):
    """``(relative path, text)`` of every text file the rules apply to."""
    for top in SCANNED:
        path = os.path.join(root, top)
        if os.path.isfile(path):
            paths = [path]
        else:
            paths = []
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
                paths += [os.path.join(dirpath, f) for f in sorted(filenames)]
        for p in paths:
            with open(p, "rb") as f:
                data = f.read()
            if b"\0" in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            yield os.path.relpath(p, root), text


def sections(text: str) -> set[str]:
    """The section numbers of docs/design.md's headings: ``"3"`` for ``## 3. ...``,
    ``"3.1"`` for ``### 3.1 ...``."""
    out = set()
    for hashes, major, minor in HEADING.findall(text):
        out.add(major if len(hashes) == 2 else f"{major}.{minor}")
    return out


def citations(text: str) -> list[str]:
    """Every section number cited after a ``design.md`` in ``text``, in order."""
    out = []
    for m in CITATION.finditer(text):
        out += re.findall(r"§(\d+(?:\.\d+)*)", m.group(1))
    return out


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def test_no_foreign_design_documents():
    found = []
    for rel, text in scanned_files():
        if rel == SELF:
            continue
        allowed = PENDING.get(rel, set())
        for pattern, name in FOREIGN:
            if name in allowed:
                continue
            for m in pattern.finditer(text):
                found.append(f"{rel}:{line_of(text, m.start())}: {name}")
        for m in DESIGN_NAME.finditer(text):
            if m.group(0) != "design.md":
                found.append(f"{rel}:{line_of(text, m.start())}: {m.group(0)}")
    assert not found, "names of documents outside the repository:\n" + "\n".join(found)


def test_design_sections_numbered_without_gaps():
    with open(DESIGN, encoding="utf-8") as f:
        text = f.read()
    heads = HEADING.findall(text)
    assert heads, "docs/design.md has no numbered sections"
    major, minor = 0, 0
    for hashes, a, b in heads:
        if len(hashes) == 2:
            assert b == "", f"## {a}.{b}: a section is '## N. Title'"
            major, minor = major + 1, 0
            assert int(a) == major, f"section {a} where {major} was due"
        else:
            minor += 1
            assert (int(a), int(b or 0)) == (major, minor), \
                f"subsection {a}.{b} where {major}.{minor} was due"


def test_citations_name_existing_sections():
    with open(DESIGN, encoding="utf-8") as f:
        design = f.read()
    have = sections(design)
    bad = []
    count = 0
    for rel, text in scanned_files():
        cited = citations(text)
        if rel == os.path.join("docs", "design.md"):
            cited = re.findall(r"§(\d+(?:\.\d+)*)", text)
        count += len(cited)
        bad += [f"{rel}: §{n}" for n in cited if n not in have]
    assert not bad, "citations of sections docs/design.md does not have:\n" + "\n".join(bad)
    assert count >= 20, f"only {count} citations of docs/design.md found: is the parser broken?"


def test_parsers():
    assert citations("x (docs/design.md §1.2, §3.4) and issue 10 §2") == ["1.2", "3.4"]
    assert citations("(docs/tree.md; docs/design.md §3.1,\n§8.1)::") == ["3.1", "8.1"]
    assert citations("docs/design.md §5) ends; DESIGN §4") == ["5"]
    assert citations("see design.md") == []
    assert sections("## 1. A\n### 1.1 B\n### 1.2 C\n## 2. D\n#### 2.1.1 E\n") == \
        {"1", "1.1", "1.2", "2"}
