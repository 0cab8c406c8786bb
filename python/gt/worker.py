"""`python -m gt.worker --host HOST -p PORT`: starts a gt worker (the C++
service gt-worker, which replaces this interpreter) that connects to the
dispatcher at tcp://HOST:PORT, e.g. one started with `python -m gt.server`.

Each worker needs its own id: the default is worker-<pid>, unique on one
machine; pass --id to name it. Unknown flags are a usage error (exit
status 2).
"""

import argparse
import os
import sys

from ._launch import exec_service
from .server import DEFAULT_PORT


def build_args(argv=None):
    """The gt-worker argument list for the command line `argv` (default:
    sys.argv[1:]). Exits with status 2 and a usage message on a bad one."""
    parser = argparse.ArgumentParser(
        prog="python -m gt.worker",
        description="Start a gt worker (gt-worker, LibTorch backend) that connects to a dispatcher.")
    parser.add_argument("--host", default="localhost", help="the dispatcher's host (default localhost)")
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT,
                        help=f"the dispatcher's TCP port (default {DEFAULT_PORT})")
    parser.add_argument("-m", "--manifest", help="worker manifest (YAML), e.g. configs/worker-compile.yaml")
    parser.add_argument("--metrics", help="host:port serving Prometheus /metrics (default: none)")
    parser.add_argument("--id", help="worker id (default: worker-<pid>)")
    parser.add_argument("--key", help="this worker's CURVE key pair (its .pub on the dispatcher's workers list)")
    parser.add_argument("--server-key", help="the dispatcher's public key file (.pub)")
    parser.add_argument("--insecure", action="store_true",
                        help="connect without keys, to a dispatcher started with --insecure (default on this "
                             "machine: this user's key set, docs/SECURITY.md)")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"argument -p/--port: {args.port} is not a TCP port (1-65535)")
    # os.execv keeps the pid, so the default id names the service's process.
    out = ["--connect", f"tcp://{args.host}:{args.port}", "--id", args.id or f"worker-{os.getpid()}"]
    for flag in ("manifest", "metrics", "key", "server_key"):
        value = getattr(args, flag)
        if value is not None:
            out += [f"--{flag.replace('_', '-')}", value]
    if args.insecure:
        out.append("--insecure")
    return out


def main(argv=None):
    exec_service("python -m gt.worker", "gt-worker", build_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
