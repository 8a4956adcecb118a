"""The manual: docs/ builds with no broken link or anchor, and every citation of it in the code resolves.

Code cites the manual as ``docs/<page>.md#<anchor>`` (docs/architecture.md#tests). Two checks keep those
true: the strict mkdocs build (mkdocs.yml's ``validation`` makes a link to a missing page or heading a
warning, ``--strict`` an error), and the citation check here, which reads every file where code lives and
resolves each citation to a page and one of its headings' anchors, computed as mkdocs' toc extension
slugifies them (the build test checks that the two agree). Citing README by a quoted section name, as code
did before the manual had pages, is refused: nothing could check it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Where code lives, and README (its links into the manual): the places whose citations must resolve.
WHERE = ("trtllm_responses", "tests", "benchmarks", "scripts", "Makefile", "pyproject.toml", "README.md")
SUFFIXES = {".py", ".toml", ".cfg", ".txt", ".sh", ".yml", ".yaml", ".md"}
CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
#: README then a comma, a colon, a space, 's or a parenthesis, then a quoted name (maybe on the next line).
README_CITATION = re.compile(r"README(?:'s)?(?:[,:]\s*|\s*\(\s*|\s+)(?:#:?\s*)?[\"'][A-Za-z`]")
HEADING = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")


def slugify(heading: str) -> str:
    """A heading's anchor as python-markdown's toc ``slugify`` makes it (mkdocs' default).

    The heading's text as rendered (inline code, emphasis and links reduced to their text), NFKD-normalised
    to ASCII, characters other than word characters, spaces and ``-`` dropped, lower case, runs of spaces and
    ``-`` one ``-``.
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"(`+)(.*?)\1", r"\2", text)
    text = re.sub(r"(\*\*|\*)(\S.*?)\1", r"\2", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    """The heading anchors of one page (outside fenced code; a repeated one gets ``_1``, ``_2`` as in toc)."""
    found: set[str] = set()
    fence = False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        match = None if fence else HEADING.match(line)
        if match:
            slug, n = slugify(match.group(1)), 0
            anchor = slug
            while anchor in found:
                n += 1
                anchor = f"{slug}_{n}"
            found.add(anchor)
    return found


def code_files(root: Path) -> Iterator[Path]:
    """The files of :data:`WHERE` under ``root`` (no caches, no node modules)."""
    for where in WHERE:
        path = root / where
        if path.is_file():
            yield path
        elif path.is_dir():
            for found in sorted(path.rglob("*")):
                parts = set(found.relative_to(root).parts)
                if (
                    found.is_file()
                    and found.suffix in SUFFIXES
                    and not parts & {"__pycache__", "node_modules"}
                ):
                    yield found


def citations(root: Path) -> Iterator[tuple[str, str, str | None]]:
    """``(file:line, page, anchor)`` for each ``docs/<page>.md[#<anchor>]`` in the code under ``root``."""
    for path in code_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in CITATION.finditer(line):
                yield f"{path.relative_to(root)}:{number}", match.group(1), match.group(2)


def broken_citations(root: Path) -> list[str]:
    """One message per citation under ``root`` whose page or anchor ``root/docs`` does not have."""
    pages: dict[str, set[str] | None] = {}  # a page's anchors; None: no such page
    problems: list[str] = []
    for where, page, anchor in citations(root):
        if page not in pages:
            path = root / "docs" / page
            pages[page] = anchors(path.read_text(encoding="utf-8")) if path.is_file() else None
        found = pages[page]
        if found is None:
            problems.append(f"{where}: docs/{page} is not a page of the manual")
        elif anchor is not None and anchor not in found:
            problems.append(f"{where}: docs/{page} has no heading with anchor #{anchor}")
    return problems


def readme_citations(root: Path) -> list[str]:
    """``file:line`` of each citation of README by section name under ``root``."""
    found: list[str] = []
    for path in code_files(root):
        text = path.read_text(encoding="utf-8")
        for match in README_CITATION.finditer(text):
            found.append(f"{path.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}")
    return found


def test_every_citation_of_the_manual_resolves() -> None:
    cited = list(citations(ROOT))
    assert len(cited) > 80, "the walk finds the code's citations"  # 90-odd at the move to docs/
    assert broken_citations(ROOT) == []


def test_no_code_cites_readme_by_section() -> None:
    assert readme_citations(ROOT) == [], "cite docs/<page>.md#<anchor> (README is a front door)"


def test_a_broken_citation_and_a_broken_anchor_are_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "stores.md").write_text(
        "# Stores\n\n```\n# not a heading\n```\n\n## Session affinity\n"
    )
    (tmp_path / "trtllm_responses").mkdir()
    d, readme = "docs", "READ" + "ME"  # spelled so that this file cites nothing itself
    (tmp_path / "trtllm_responses" / "mod.py").write_text(
        f'"""Good ({d}/stores.md#session-affinity, {d}/stores.md).\n'
        f"Bad: {d}/stores.md#not-a-heading, {d}/frontends.md#stores.\n"
        f'Old: ({readme}, "Stores") and {readme}\'s "Layout".\n"""\n'
    )
    assert broken_citations(tmp_path) == [
        f"trtllm_responses/mod.py:2: {d}/stores.md has no heading with anchor #not-a-heading",
        f"trtllm_responses/mod.py:2: {d}/frontends.md is not a page of the manual",
    ]
    assert readme_citations(tmp_path) == ["trtllm_responses/mod.py:3", "trtllm_responses/mod.py:3"]


def test_anchors_are_computed_as_toc_computes_them() -> None:
    assert slugify("Many frontends (`--num_serve_frontends`)") == "many-frontends-num_serve_frontends"
    assert (
        slugify("gpt-oss's own tools: python (`code_interpreter`)")
        == "gpt-osss-own-tools-python-code_interpreter"
    )
    assert anchors("# A\n## A\n```\n## B\n```\n") == {"a", "a_1"}


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_manual_builds_strict_and_its_anchors_are_ours(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for page in sorted((ROOT / "docs").glob("*.md")):
        html = tmp_path / "site" / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        ids = set(re.findall(r'<h[1-6] id="([^"]+)"', html.read_text(encoding="utf-8")))
        assert anchors(page.read_text(encoding="utf-8")) == ids, page.name


def test_the_strict_build_fails_on_a_broken_link_or_anchor(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [stores](stores.md#nowhere) and [gone](gone.md).\n")
    (docs / "stores.md").write_text("# Stores\n")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(config.split("\nnav:")[0] + "\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "does not contain an anchor '#nowhere'" in done.stderr + done.stdout
    assert "'gone.md', but the target is not found" in done.stderr + done.stdout
