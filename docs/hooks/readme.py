"""MkDocs hook: the repository's README.md is the site's home page.

The README links to pages as ``docs/x.md`` (right on GitHub); on the site those
pages sit beside the home page, so the prefix is dropped. Nothing is copied:
the README stays the one text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[2] / "README.md"
DOCS_LINK = re.compile(r"\]\(docs/")


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(README)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri == "index.md":
        return DOCS_LINK.sub("](", markdown)
    return markdown
