"""README.md's layout table names every folder of the repository: each top-level
folder has a row, and each folder below one is a row of its own or is named in its
parent's row (as `name/`). A row naming a folder that does not exist fails too."""

import pathlib
import re
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


def tracked_folders(depth=2):
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    folders = set()
    for f in files:
        parts = f.split("/")[:-1]
        if not parts or parts[0].startswith("."):
            continue
        for n in range(1, min(depth, len(parts)) + 1):
            folders.add("/".join(parts[:n]))
    return folders


def layout_rows():
    text = (REPO / "README.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([^`]+)/` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def covered(folder, rows):
    if folder in rows or any(row.startswith(folder + "/") for row in rows):
        return True
    parent, _, name = folder.rpartition("/")
    return parent in rows and f"`{name}/`" in rows[parent] or f"`{name}/" in rows.get(parent, "")


def test_every_folder_is_in_the_layout_table():
    if not (REPO / ".git").exists():
        import pytest
        pytest.skip("not a git checkout")
    rows = layout_rows()
    assert rows, "README.md has no layout table"
    missing = sorted(f for f in tracked_folders() if not covered(f, rows))
    assert not missing, f"folders missing from README.md's layout table: {missing}"


def test_every_row_names_a_folder_that_exists():
    stale = sorted(row for row in layout_rows() if not (REPO / row).is_dir())
    assert not stale, f"README.md's layout table names folders that do not exist: {stale}"
