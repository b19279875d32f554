"""The documentation site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: a link to a
page or an anchor that is not there, or a page left out of the nav, fails the build, and so this
test. The build runs as the command an author runs, into a folder of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.replication import REPO

MKDOCS = [sys.executable, "-m", "mkdocs"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip


def test_the_site_builds_strictly(tmp_path):
    result = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    for page in ("index.html", "tutorial/index.html", "design/index.html", "reference/configuration/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_a_broken_anchor_fails_the_build(tmp_path):
    """The strict build is what catches a broken link: a copy of the site with one anchor
    that no heading has must fail, naming it."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO / "docs"), str(docs)], check=True)
    page = docs / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[nowhere](design.md#no-such-section)\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text((REPO / "mkdocs.yml").read_text(encoding="utf-8").replace("docs_dir: docs", f"docs_dir: {docs}"))
    result = build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stderr
