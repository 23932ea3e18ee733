"""The docs' own links: every relative link in README.md and docs/ names a
file of the checkout."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def dangling(pages):
    out = []
    for page in pages:
        for m in LINK.finditer(page.read_text()):
            target = m.group(1).split("#")[0]
            if target and not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                out.append(f"{page.relative_to(REPO)}: {target}")
    return out


def test_every_relative_link_names_a_file():
    pages = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
    assert len(pages) > 20
    assert dangling(pages) == []


def test_a_dangling_link_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    page = tmp_path / "a.md"
    page.write_text("[ok](a.md) [web](https://lore.kernel.org/) [gone](b.md#x)\n")
    assert dangling([page]) == ["a.md: b.md"]
