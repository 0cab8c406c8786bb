"""The `gt` command's help and listings (issue 40, item 6): `gt --help` lists
every subcommand with one line; `gt COMMAND --help` prints its arguments and
does nothing else (keygen wrote `--help.key`, validate read a manifest named
`--help`, inspect looked for a plugin named `--help`); `gt inspect`'s columns
line up whatever the widths of their cells."""

import os
import pathlib
import re
import subprocess

import pytest

BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", pathlib.Path(__file__).resolve().parents[2] / "build" / "bin"))
SUBCOMMANDS = ["inspect", "validate", "cluster", "top", "keygen", "env"]


def gt(*args, cwd=None):
    if not (BIN / "gt").exists():
        pytest.skip(f"gt not built in {BIN}")
    return subprocess.run([str(BIN / "gt"), *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, "GT_PLUGIN_PATH": ""})


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_gt_help_lists_every_subcommand_with_a_line(flag):
    r = gt(flag)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("usage: gt COMMAND")
    listed = {m.group(1): m.group(2) for m in (re.match(r"^  (\w+) +(\S.*)$", line) for line in lines) if m}
    assert sorted(listed) == sorted(SUBCOMMANDS)
    assert all(len(text) > 10 for text in listed.values()), listed


@pytest.mark.parametrize("command", SUBCOMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_subcommand_help_prints_its_usage_and_does_nothing_else(command, flag, tmp_path):
    r = gt(command, flag, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"usage: gt {command}"), r.stdout
    assert r.stderr == ""
    assert list(tmp_path.iterdir()) == []  # gt keygen --help wrote --help.key and --help.pub


def test_help_after_other_arguments_still_runs_nothing(tmp_path):
    r = gt("keygen", "alice", "--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: gt keygen")
    assert list(tmp_path.iterdir()) == []


def test_unknown_subcommand_is_named_with_the_list():
    r = gt("inspcet")
    assert r.returncode == 2
    assert "gt: unknown command 'inspcet'" in r.stderr and "  inspect " in r.stderr


def test_inspect_columns_line_up():
    r = gt("inspect")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    rows = lines[lines.index("plugins:") + 1:]
    rows = [row for row in rows if not row.lstrip().startswith(("options:", "(unusable)"))]
    header, plugins = rows[0], rows[1:]
    assert header.split() == ["NAME", "KIND", "VERSION", "HOSTS", "DESCRIPTION"]
    assert {p.split()[0] for p in plugins} >= {"torch", "sharding", "instruction_log", "hotpath", "compile"}
    starts = [header.index(title) for title in ["KIND", "VERSION", "HOSTS", "DESCRIPTION"]]
    for row in plugins:
        for start in starts:  # every column begins where its title does, after at least two spaces
            assert row[start - 2:start] == "  " and row[start] != " ", (row, start)
    # The longest hosts cell ("dispatcher, worker, client") no longer runs into the description.
    assert any("dispatcher, worker, client  " in row for row in plugins), plugins
