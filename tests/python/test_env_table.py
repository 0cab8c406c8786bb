"""README.md's "Environment variables" table names exactly the GT_* variables
the code reads.

The code's set is found by scanning the sources, not by a list kept here:
  - C++ `getenv("GT_...")` calls (std::getenv, getenv, secure_getenv) in the
    client, core, services, modifiers and plugins;
  - the env field of every OptionSpec initializer in modifiers/*/plugin.cc and
    plugins/torch/plugin.cc (the last field; a string literal, or a constant
    defined as "GT_..." in that plugin's folder);
  - Python `os.environ` / `os.getenv` reads of GT_* in python/gt.
A variable read by the code with no row fails, and so does a row for a
variable the code no longer reads.
"""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]

# Scanned for C++ getenv calls. tests/ and bench/ are left out on purpose:
# their variables (GT_TEST_*, GT_SDK_*, GT_SOURCE_DIR, GT_PROMETHEUS_BIN, the
# benchmarks' own reads of GT_WORKERS ...) configure the test and benchmark
# harnesses, not gt, so they have no row in the user-facing table.
CPP_DIRS = ["client", "core", "services", "modifiers", "plugins"]
CPP_SUFFIXES = {".cc", ".h", ".cpp", ".hpp"}

GETENV = re.compile(r'\b(?:std::)?(?:secure_)?getenv\(\s*"(GT_[A-Z0-9_]+)"\s*\)')
OPTIONS_TABLE = re.compile(r"constexpr\s+OptionSpec\s+\w+\[\]\s*=\s*\{(.*?)\n\};", re.S)
STRING_CONSTANT = re.compile(r'constexpr\s+(?:const\s+)?char\s*(?:const\s*)?\*\s*(\w+)\s*=\s*"(GT_[A-Z0-9_]+)"')
PY_ENV = re.compile(r'\b(?:os|_os)\.(?:environ\.get\(|environ\[|getenv\()\s*["\'](GT_[A-Z0-9_]+)["\']')


def _cpp_files():
    for d in CPP_DIRS:
        for path in sorted((REPO / d).rglob("*")):
            if path.suffix in CPP_SUFFIXES and path.is_file():
                yield path


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


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


def _last_field(initializer):
    """The last comma-separated field, commas inside string literals kept."""
    fields, current, quoted = [], "", False
    for ch in initializer:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            fields.append(current)
            current = ""
        else:
            current += ch
    fields.append(current)
    return fields[-1].strip(), len(fields)


def getenv_names():
    names = set()
    for path in _cpp_files():
        names |= set(GETENV.findall(_strip_comments(path.read_text())))
    return names


def option_spec_names():
    """{variable: plugin.cc} for every OptionSpec with an env field."""
    found = {}
    plugins = sorted((REPO / "modifiers").glob("*/plugin.cc")) + [REPO / "plugins" / "torch" / "plugin.cc"]
    for plugin in plugins:
        constants = {}
        for path in plugin.parent.iterdir():
            if path.suffix in CPP_SUFFIXES:
                constants.update(STRING_CONSTANT.findall(_strip_comments(path.read_text())))
        for table in OPTIONS_TABLE.findall(_strip_comments(plugin.read_text())):
            for init in _initializers(table):
                last, count = _last_field(init)
                # name, type, default, unit, doc, min, max: an 8th field is env.
                if count < 8 or last in ("nullptr", ""):
                    continue
                literal = re.fullmatch(r'"(GT_[A-Z0-9_]+)"', last)
                name = literal.group(1) if literal else constants.get(last)
                assert name, f"{plugin.relative_to(REPO)}: OptionSpec env field {last!r} is not a GT_* name"
                found[name] = str(plugin.relative_to(REPO))
    return found


def python_names():
    names = set()
    for path in sorted((REPO / "python" / "gt").rglob("*.py")):
        names |= set(PY_ENV.findall(path.read_text()))
    return names


def code_names():
    return getenv_names() | set(option_spec_names()) | python_names()


def readme_table():
    """{variable: (default, effect)} from README.md's Environment variables table."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Environment variables\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Environment variables' section"
    rows = {}
    for line in section.group(1).splitlines():
        m = re.match(r"\|\s*`(GT_[A-Z0-9_]+)`\s*\|(.*)\|\s*$", line)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            assert m.group(1) not in rows, f"README table: {m.group(1)} has two rows"
            rows[m.group(1)] = cells
    return rows


def test_scanner_finds_the_known_kinds_of_read():
    # Guards the scanner itself: one of each kind of read it must see.
    assert "GT_WORKERS" in getenv_names()
    assert option_spec_names().get("GT_EXPLAIN") == "modifiers/sharding/plugin.cc"   # a literal
    assert option_spec_names().get("GT_HOTPATH_WINDOW") == "modifiers/hotpath/plugin.cc"   # a constant
    assert {"GT_CONFIG", "GT_BIN_DIR"} <= python_names()


def test_readme_table_matches_the_code():
    code, table = code_names(), set(readme_table())
    missing = sorted(code - table)
    stale = sorted(table - code)
    assert not missing, f"read by the code but not in README.md's Environment variables table: {missing}"
    assert not stale, f"in README.md's Environment variables table but read nowhere in the code: {stale}"


def test_readme_rows_give_a_default_and_an_effect():
    for name, cells in readme_table().items():
        assert len(cells) == 2 and all(cells), f"README table row {name}: want | default | effect |, got {cells}"


def test_option_spec_defaults_match_the_readme():
    # For variables that override a plugin option, the row's default is the
    # option's default as written once in the OptionSpec.
    table = readme_table()
    for name, plugin in option_spec_names().items():
        text = _strip_comments((REPO / plugin).read_text())
        constants = {}
        for path in (REPO / plugin).parent.iterdir():
            if path.suffix in CPP_SUFFIXES:
                constants.update({v: k for k, v in STRING_CONSTANT.findall(_strip_comments(path.read_text()))})
        ref = re.escape(f'"{name}"') + "|" + (r"\b" + constants[name] + r"\b" if name in constants else "(?!)")
        for table_body in OPTIONS_TABLE.findall(text):
            for init in _initializers(table_body):
                if re.search(ref, init):
                    default = re.findall(r'"((?:[^"\\]|\\.)*)"', init.split(",", 3)[2])
                    want = default[0] if default else None
                    if want:
                        assert f"`{want}`" in table[name][0], (name, want, table[name][0])
