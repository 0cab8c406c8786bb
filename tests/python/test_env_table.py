"""README.md's "Environment variables" table is gt's list of GT_* variables
(core/host/settings.cc, gt/settings.h), and the code reads no other.

  - The list is read from `gt env` (the binary), not from a copy kept here;
    README's rows must be exactly the rows `gt env --markdown` prints, in
    both directions.
  - The code's reads are found by scanning the sources: every "GT_..." string
    literal in the client, core, services, modifiers and plugins (the names
    handed to the settings functions, and the env field of every OptionSpec,
    a literal or a constant defined in that plugin's folder), and the
    `_C._setting("GT_...")` calls of python/gt. A read of a variable that is
    not listed fails, and so does a listed variable that nothing reads.
  - getenv is called in one file, the list's; python/gt reads no GT_*
    variable from os.environ itself.
"""

import functools
import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SETTINGS_CC = REPO / "core" / "host" / "settings.cc"

# tests/ and bench/ are left out on purpose: their variables (GT_TEST_*,
# GT_SDK_*, GT_SOURCE_DIR, GT_PROMETHEUS_BIN, the benchmarks' own reads of
# GT_WORKERS ...) configure the test and benchmark harnesses, not gt.
CPP_DIRS = ["client", "core", "services", "modifiers", "plugins"]
CPP_SUFFIXES = {".cc", ".h", ".cpp", ".hpp"}

GT_LITERAL = re.compile(r'"(GT_[A-Z0-9_]+)"')
GETENV = re.compile(r"\b(?:std::)?(?:secure_)?getenv\s*\(")
OPTIONS_TABLE = re.compile(r"constexpr\s+OptionSpec\s+\w+\[\]\s*=\s*\{(.*?)\n\};", re.S)
STRING_CONSTANT = re.compile(r'constexpr\s+(?:const\s+)?char\s*(?:const\s*)?\*\s*(\w+)\s*=\s*"(GT_[A-Z0-9_]+)"')
PY_SETTING = re.compile(r'\b_C\._setting\(\s*["\'](GT_[A-Z0-9_]+)["\']')
PY_ENVIRON = re.compile(r'\b(?:os|_os)\.(?:environ\.get\(|environ\[|getenv\()\s*["\'](GT_[A-Z0-9_]+)["\']')
# An OptionSpec's type and the settings type of the variable that overrides it.
OPTION_TYPE_TO_SETTING = {"kBool": "switch", "kInt": "int", "kDouble": "seconds", "kString": "text"}


def _cpp_files():
    for d in CPP_DIRS:
        for path in sorted((REPO / d).rglob("*")):
            if path.suffix in CPP_SUFFIXES and path.is_file():
                yield path


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


@functools.lru_cache(maxsize=None)
def _gt_env(*args):
    bin_dir = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))
    gt = bin_dir / "gt"
    if not gt.exists():
        pytest.skip(f"gt not built in {bin_dir}")
    env = {k: v for k, v in os.environ.items() if k != "GT_PLUGIN_PATH"}
    out = subprocess.run([str(gt), "env", *args], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def settings_list():
    """{variable: type} as `gt env` prints the list."""
    found = {}
    for line in _gt_env().splitlines():
        m = re.match(r"(GT_[A-Z0-9_]+)\s+(switch|int|seconds|text)\s", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def _initializers(table):
    """The top-level {...} initializers of an OptionSpec array's body."""
    items, depth, start = [], 0, None
    for i, ch in enumerate(table):
        if ch == "{":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                items.append(table[start:i])
    return items


def _fields(initializer):
    """The comma-separated fields, commas inside string literals kept."""
    fields, current, quoted = [], "", False
    for ch in initializer:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            fields.append(current.strip())
            current = ""
        else:
            current += ch
    fields.append(current.strip())
    return fields


def option_specs():
    """{variable: (plugin.cc, OptionType name, default)} for every OptionSpec with an env field."""
    found = {}
    plugins = sorted((REPO / "modifiers").glob("*/plugin.cc")) + [REPO / "plugins" / "torch" / "plugin.cc"]
    for plugin in plugins:
        constants = {}
        for path in plugin.parent.iterdir():
            if path.suffix in CPP_SUFFIXES:
                constants.update(STRING_CONSTANT.findall(_strip_comments(path.read_text())))
        for table in OPTIONS_TABLE.findall(_strip_comments(plugin.read_text())):
            for init in _initializers(table):
                fields = _fields(init)
                # name, type, default, unit, doc, min, max: an 8th field is env.
                if len(fields) < 8 or fields[-1] in ("nullptr", ""):
                    continue
                literal = re.fullmatch(r'"(GT_[A-Z0-9_]+)"', fields[-1])
                name = literal.group(1) if literal else constants.get(fields[-1])
                assert name, f"{plugin.relative_to(REPO)}: OptionSpec env field {fields[-1]!r} is not a GT_* name"
                option_type = fields[1].rsplit("::", 1)[-1]
                default = re.findall(r'"((?:[^"\\]|\\.)*)"', fields[2])
                found[name] = (str(plugin.relative_to(REPO)), option_type, default[0] if default else None)
    return found


def cpp_names():
    """{variable: first file} for every "GT_..." literal outside the list itself."""
    names = {}
    for path in _cpp_files():
        if path == SETTINGS_CC:
            continue
        for name in GT_LITERAL.findall(_strip_comments(path.read_text())):
            names.setdefault(name, str(path.relative_to(REPO)))
    return names


def python_names():
    names = set()
    for path in sorted((REPO / "python" / "gt").rglob("*.py")):
        names |= set(PY_SETTING.findall(path.read_text()))
    return names


def readme_rows():
    """README.md's Environment variables table rows, as lines, in order."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Environment variables\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Environment variables' section"
    return [line for line in section.group(1).splitlines() if re.match(r"\|\s*`GT_", line)]


def test_scanner_finds_the_known_kinds_of_read():
    # Guards the scanner itself: one of each kind of read it must see.
    assert cpp_names().get("GT_WORKERS", "").startswith("client/")
    assert option_specs()["GT_EXPLAIN"][0] == "modifiers/sharding/plugin.cc"   # a literal
    assert option_specs()["GT_HOTPATH_WINDOW"][:2] == ("modifiers/hotpath/plugin.cc", "kInt")   # a constant
    assert {"GT_CONFIG", "GT_BIN_DIR"} <= python_names()
    assert settings_list()["GT_CONNECT_TIMEOUT"] == "seconds"


def test_readme_table_is_the_settings_list():
    want = [line for line in _gt_env("--markdown").splitlines() if line.startswith("| `GT_")]
    got = readme_rows()
    name = lambda row: row.split("`")[1]
    missing = sorted(set(map(name, want)) - set(map(name, got)))
    stale = sorted(set(map(name, got)) - set(map(name, want)))
    assert not missing, f"in gt's settings list but not in README.md's Environment variables table: {missing}"
    assert not stale, f"in README.md's Environment variables table but not in gt's settings list: {stale}"
    for w, g in zip(want, got):
        assert g == w, f"README row differs from `gt env --markdown` (regenerate it):\n  README: {g}\n  gt env: {w}"


def test_the_code_reads_only_listed_variables_and_every_listed_one_is_read():
    listed = settings_list()
    read = set(cpp_names()) | set(option_specs()) | python_names()
    unlisted = sorted(read - set(listed))
    unread = sorted(set(listed) - read)
    assert not unlisted, f"read by the code but not declared in core/host/settings.cc: {unlisted}"
    assert not unread, f"declared in core/host/settings.cc but read nowhere: {unread}"


def test_option_overrides_have_the_options_type():
    listed = settings_list()
    for name, (plugin, option_type, _) in option_specs().items():
        assert listed[name] == OPTION_TYPE_TO_SETTING[option_type], (name, plugin, option_type, listed[name])


def test_getenv_is_called_only_by_the_settings_list():
    callers = sorted(str(p.relative_to(REPO)) for p in _cpp_files() if GETENV.search(_strip_comments(p.read_text())))
    assert callers == ["core/host/settings.cc"], callers
    for path in sorted((REPO / "python" / "gt").rglob("*.py")):
        assert not PY_ENVIRON.findall(path.read_text()), f"{path.relative_to(REPO)} reads a GT_* variable itself"


def test_readme_rows_give_a_default_and_an_effect():
    for row in readme_rows():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) == 3 and all(cells), f"README table row: want | variable | default | effect |, got {cells}"


def test_option_spec_defaults_match_the_readme():
    # For variables that override a plugin option, the row's default is the
    # option's default as written once in the OptionSpec.
    rows = {row.split("`")[1]: row for row in readme_rows()}
    for name, (_, _, default) in option_specs().items():
        cell = [c.strip() for c in rows[name].strip().strip("|").split("|")][1]
        assert cell == (f"`{default}`" if default else "unset"), (name, default, cell)
