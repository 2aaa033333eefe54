"""The documentation: the MkDocs site builds in strict mode, and the README stays a short user's page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 250


def test_mkdocs_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` succeeds: every page in the nav exists, no link or anchor is broken."""
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}\n{result.stdout}"
    assert (site / "index.html").is_file(), result.stderr
    for page in ("guide", "configs", "methods", "verdict", "zoo", "results"):
        assert (site / page / "index.html").is_file(), f"docs/{page}.md was not built"


def test_readme_is_short_and_about_the_software() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"
    # it describes the software, not how it was developed
    for pattern in (r"session", r"issue "):
        hits = [f"{n}: {line}" for n, line in enumerate(lines, 1) if re.search(pattern, line, re.IGNORECASE)]
        assert not hits, f"README.md mentions {pattern!r}:\n" + "\n".join(hits)
    # the two quickstart commands are there, and the Makefile still has them
    assert "make demo" in text and "make test" in text
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)


def test_readme_links_point_at_existing_files() -> None:
    """Every relative link of the README names a file of the repository (docs pages in particular)."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+://", t)]
    assert any(t.startswith("docs/") for t in local), "the README links no docs page"
    missing = [t for t in local if t and not (ROOT / t).exists()]
    assert not missing, f"README.md links missing files: {missing}"
