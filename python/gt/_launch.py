"""Finding and starting the C++ services behind `python -m gt.server` and
`python -m gt.worker`.

The Python modules are thin: they turn the seed's flags into the services'
flags and replace this interpreter with the service (os.execv), so a signal
sent to the process (Ctrl-C, SIGTERM) reaches the service itself, which stops
gracefully.
"""

import os
import pathlib
import shutil
import sys

from . import _C

__all__ = ["find_service", "exec_service"]


def _candidate_dirs():
    # GT_BIN_DIR first (the tests' convention), then next to the package:
    # the build tree lays it out as build/python/gt with the services in
    # build/bin; an install as <prefix>/lib/python3/dist-packages/gt with
    # them in <prefix>/bin. The package path is taken unresolved: in the build
    # tree the .py files are symlinks into the source tree.
    env = _C._setting("GT_BIN_DIR")  # through gt/settings.h, the one list of GT_* variables
    if env:
        yield pathlib.Path(env)
    package = pathlib.Path(os.path.abspath(__file__)).parent
    yield package.parents[1] / "bin"  # build/python/gt -> build/bin
    if len(package.parents) > 3:
        yield package.parents[3] / "bin"  # <prefix>/lib/python3/dist-packages/gt -> <prefix>/bin


def find_service(name):
    """The path of the service executable `name` ('gt-dispatcher', 'gt-worker'):
    in $GT_BIN_DIR, next to the package (build tree or install), else on PATH.
    Raises FileNotFoundError naming every place looked at."""
    tried = []
    for d in _candidate_dirs():
        path = d / name
        tried.append(str(path))
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    tried.append("PATH")
    raise FileNotFoundError(f"{name} not found (looked in {', '.join(tried)}); build it "
                            f"(ninja -C build {name}) or set GT_BIN_DIR to the directory that holds it")


def exec_service(prog, name, args):
    """Replaces this process with the service `name` run with `args`; on
    failure to find or start it, prints why (as `prog`) and exits with 1."""
    try:
        path = find_service(name)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(path, [path] + list(args))
    except OSError as e:  # FileNotFoundError included
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(1)
