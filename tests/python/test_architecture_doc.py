"""docs/ARCHITECTURE.md names files and functions; each must exist as named, so the
walk-through cannot drift from the code (it once cited AdmitFromClient, long gone).
A backticked path must be a file or folder of the repository (`gt/x.h` is a public
header, `{a,b}` expands); a backticked C++ name (`Router::Accept`, `InferResult`)
must be declared or defined in the sources under that name."""

import itertools
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ARCHITECTURE.md"
SOURCE_DIRS = ["core", "client", "plugins", "modifiers", "services", "python"]
PATH_RE = re.compile(r"^[\w.\-{},/]+\.(cc|h|py|proto|yaml|cmake|def|md)$|^[\w\-]+(/[\w\-]+)*/$")
NAME_RE = re.compile(r"^(?:[A-Za-z_]\w*::)*[A-Z][a-z]\w*(?:\(\))?$")
PUBLIC_HEADER_ROOTS = ["core/include", "client/include"]


def backticked():
    return set(re.findall(r"`([^`\n]+)`", DOC.read_text()))


def expand(token):
    parts = re.split(r"(\{[^}]*\})", token)
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def path_exists(path):
    if (REPO / path).exists():
        return True
    return path.startswith("gt/") and any((REPO / root / path).exists() for root in PUBLIC_HEADER_ROOTS)


def source_text():
    texts = []
    for d in SOURCE_DIRS:
        for f in (REPO / d).rglob("*"):
            if f.suffix in {".cc", ".h", ".def", ".py", ".proto"}:
                texts.append(f.read_text(errors="replace"))
    return "\n".join(texts)


def test_every_path_the_walkthrough_names_exists():
    paths = [t for t in backticked() if PATH_RE.match(t) and "/" in t]
    assert len(paths) > 30, "the walk-through names too few files: is the pattern still right?"
    missing = sorted(p for t in paths for p in expand(t) if not path_exists(p))
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_every_function_and_class_the_walkthrough_names_exists():
    names = [t for t in backticked() if NAME_RE.match(t)]
    assert len(names) > 30, "the walk-through names too few functions: is the pattern still right?"
    text = source_text()
    missing = []
    for name in sorted(names):
        parts = name.removesuffix("()").split("::")
        found = all(re.search(rf"\b{re.escape(p)}\b", text) for p in parts)
        if len(parts) > 1 and found:
            # Class::Method: the method defined or declared with its class in view
            # (`class Outer::Inner {` defines Inner, as worker.cc does Worker::Impl).
            cls, method = parts[-2], parts[-1]
            found = bool(re.search(rf"\b{re.escape(cls)}::{re.escape(method)}\b", text)) or bool(
                re.search(rf"class (?:\w+::)*{re.escape(cls)}\b[\s\S]{{0,20000}}?\b{re.escape(method)}\(", text))
        if not found:
            missing.append(name)
    assert not missing, f"docs/ARCHITECTURE.md names functions or classes not in the code: {missing}"
