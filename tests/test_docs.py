"""The documentation holds together: every relative link in the README and docs/ resolves (its `#section` too), every
`*.md` file the code or the docs name exists in the repository, and the README's quality table is the shipped
model's own `quality.json`.

Read from the files as they are, so a renamed doc, a dropped heading or a retrained model without a regenerated
table fails here. (The examples themselves run in tests/test_readme_examples.py.)"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
MD_NAME = re.compile(r"(?<![\w./-])([\w./-]*\w\.md)\b")
PROSE_FILES = re.compile(r"^(wmstudio/|benchmarks/|spaces/|docs/|\.ci/|app\.py$|pyproject\.toml$|README\.md$|"
                         r"assets/models/[^/]+/README\.md$)")
sys.path.insert(0, str(ROOT / "docs"))
import headline_table  # noqa: E402 - docs/headline_table.py, the README's current accuracy table's writer
import quality_table  # noqa: E402 - docs/quality_table.py, the README table's writer


def without_code(markdown: str) -> str:
    """The page without fenced code blocks and inline code (paths there are examples, not links)."""
    markdown = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", markdown, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", markdown)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in without_code(page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            text = re.sub(r"[`*_]", "", heading.group(1).strip().lower())
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(without_code(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{page.name}: {target} (no heading #{anchor} in {linked.name})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    assert not broken_links(page)


def repository_files() -> list[str]:
    """The files git tracks and the untracked ones it does not ignore, relative to the repository."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [name for name in listed if (ROOT / name).is_file()]


def prose(path: Path) -> str:
    """What a file says to a reader: a Python file's comments and docstrings (its string data is data, such as a
    simulated file system's `todo.md`), any other file whole."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return text
    said = [token.string for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            said.append(ast.get_docstring(node) or "")
    return "\n".join(said)


def test_every_md_file_named_in_the_code_and_the_docs_exists():
    files = repository_files()
    names = {Path(name).name for name in files}
    missing = []
    for name in files:
        if not PROSE_FILES.match(name) or not name.endswith((".py", ".md", ".toml")) and not name.startswith(".ci/"):
            continue
        for mentioned in set(MD_NAME.findall(prose(ROOT / name))):
            if mentioned.startswith("/"):  # an absolute path: a user's file in an example, not ours
                continue
            here = [ROOT / mentioned, (ROOT / name).parent / mentioned]
            if "/" in mentioned and not any(p.exists() for p in here) or "/" not in mentioned and mentioned not in names:
                missing.append(f"{name} names {mentioned}")
    assert not missing, "\n".join(missing)


def test_the_readme_accuracy_table_is_what_the_benchmarks_measured():
    headline = json.loads(headline_table.HEADLINE.read_text(encoding="utf-8"))
    table = headline_table.render(headline)
    for page in (ROOT / "README.md", ROOT / "docs" / "results.md"):  # the front page, and the notebook's top
        assert headline_table.block(page.read_text(encoding="utf-8")) == table, \
            f"regenerate {page.name}'s: python docs/headline_table.py"
    demo = headline["single"]["demo"]["figures"]
    assert f"| values copied from the state shown | {demo['model']['field_accuracy']['copy_state']:.1%} | " \
        f"{demo['echo_plus_plus']['field_accuracy']['copy_state']:.1%} |" in table  # the model, then echo++


def test_the_readme_quality_table_is_the_shipped_models_own():
    quality = json.loads(quality_table.QUALITY.read_text(encoding="utf-8"))
    table = quality_table.render(quality)
    assert quality_table.block((ROOT / "README.md").read_text(encoding="utf-8")) == table, \
        "regenerate it: python docs/quality_table.py"
    raw = quality["figures"]["raw"]["field_accuracy"]["copy_call"]
    assert f"| copied from the call (ids, names) | {raw:.1%} |" in table  # the model's own figure, first column


def test_the_readme_stays_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "pip install -e . && python app.py" in readme and "bash .ci/run" in readme  # the two set-up commands
    assert "](docs/simulate.png)" in readme and (ROOT / "docs" / "simulate.png").stat().st_size > 10_000
