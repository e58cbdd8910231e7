"""The documentation's house rules, checked (`make docs-check`; tests/unit/test_docs_check.py runs the same).

Reference pages (README.md and docs/*.md) say what is true now; measurements live in docs/measurements/, one
file per benchmark with its command, machine and date. This script fails when:

- a reference page passes its size target (SIZE_LIMITS, in bytes: 1 KB = 1,000 bytes);
- a reference page carries a date of the project's year (DATE_MARK) outside a fenced block (a quoted example
  output keeps its dates);
- docs/README.md, the index, is missing or does not link every docs/*.md page;
- a relative link in any Markdown page of README.md, NEWS.md or docs/ names a file that does not exist, or
  a heading (`#anchor`) that the target page does not have.

Pure functions over the pages' text (`problems`), one edge that reads the tree (`read_pages`).
Usage: python scripts/docs_check.py [ROOT]; exit 0 when nothing is wrong, 1 otherwise (one line per problem).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath

KB = 1000
SIZE_LIMITS: Mapping[str, int] = {
    "docs/gates.md": 60 * KB,
    "docs/load-runner.md": 25 * KB,
    "README.md": 25 * KB,
}
DATE_MARK = "2026-"
INDEX = "docs/README.md"

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def is_reference(path: str) -> bool:
    """README.md and the pages directly in docs/ (the index included); docs/measurements/ is not reference."""
    p = PurePosixPath(path)
    return path == "README.md" or (p.parent == PurePosixPath("docs") and p.suffix == ".md")


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line outside a fenced block."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def dates_outside_fences(text: str) -> list[int]:
    """The line numbers where DATE_MARK appears outside a fenced block."""
    return [number for number, line in prose_lines(text) if DATE_MARK in line]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a page (a repeated heading gets -1, -2, ... as GitHub numbers them)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(text):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every Markdown link outside fenced blocks and inline code."""
    for number, line in prose_lines(text):
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            yield number, match.group(1)


def broken_links(path: str, text: str, pages: Mapping[str, str], exists: Callable[[str], bool]) -> list[str]:
    """One message per relative link of `path` whose file or heading does not exist."""
    out: list[str] = []
    here = PurePosixPath(path).parent
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        resolved = _normalize(here / name) if name else path
        if resolved is None or (resolved not in pages and not exists(resolved)):
            out.append(f"{path}:{number}: link to {target!r}: no such file ({resolved})")
            continue
        if anchor and resolved in pages and anchor not in anchors(pages[resolved]):
            out.append(f"{path}:{number}: link to {target!r}: {resolved} has no heading #{anchor}")
    return out


def _normalize(path: PurePosixPath) -> str | None:
    parts: list[str] = []
    for part in path.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part.rstrip("/"))
    return "/".join(parts) if parts else "."


def problems(pages: Mapping[str, str], exists: Callable[[str], bool]) -> list[str]:
    """Everything wrong with the docs. `pages`: Markdown path (relative, POSIX) -> text; `exists`: whether a
    path of the tree (a file or folder a link may name) exists."""
    out: list[str] = []
    for path, limit in SIZE_LIMITS.items():
        if path not in pages:
            out.append(f"{path}: missing (its size target is {limit // KB} KB)")
            continue
        size = len(pages[path].encode())
        if size > limit:
            out.append(f"{path}: {size:,} bytes, over its target of {limit:,} ({limit // KB} KB)")
    for path in sorted(p for p in pages if is_reference(p)):
        for number in dates_outside_fences(pages[path]):
            out.append(f"{path}:{number}: a '{DATE_MARK}' date in reference (see docs/measurements/)")
    if INDEX not in pages:
        out.append(f"{INDEX}: missing (the docs index: which page answers which question)")
    else:
        linked = {_normalize(PurePosixPath("docs") / t.partition("#")[0]) for _, t in links(pages[INDEX])}
        for path in sorted(p for p in pages if is_reference(p) and p.startswith("docs/") and p != INDEX):
            if path not in linked:
                out.append(f"{INDEX}: does not link {path}")
    for path in sorted(pages):
        out.extend(broken_links(path, pages[path], pages, exists))
    return out


def read_pages(root: Path) -> dict[str, str]:
    """The Markdown pages the check reads: README.md, NEWS.md and docs/**/*.md."""
    names = [n for n in ("README.md", "NEWS.md") if (root / n).is_file()]
    names += sorted(p.relative_to(root).as_posix() for p in (root / "docs").rglob("*.md"))
    return {n: (root / n).read_text(encoding="utf-8") for n in names}


def check(root: Path) -> tuple[list[str], dict[str, str]]:
    """The problems of the tree at `root`, and the pages read."""
    pages = read_pages(root)
    return problems(pages, lambda rel: (root / rel).exists()), pages


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    found, pages = check(root)
    for line in found:
        print(line)
    sizes = ", ".join(f"{p} {len(pages[p].encode()) / KB:.1f} KB" for p in SIZE_LIMITS if p in pages)
    print(f"docs-check: {len(found)} problem(s); {sizes}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
