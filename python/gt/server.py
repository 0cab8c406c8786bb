"""`python -m gt.server -p PORT`: starts a gt dispatcher (the C++ service
gt-dispatcher, which replaces this interpreter) listening on tcp://HOST:PORT
and, for the default host or 127.0.0.1, also on ipc:///tmp/gt-dispatcher-<netns>-PORT.sock,
which local workers and clients use by themselves (README "Running a cluster").

Without --key it authenticates with this user's key set (~/.config/gt/keys,
made on first use, readable by this user only; docs/SECURITY.md): this user's
workers (`python -m gt.worker --host HOST -p PORT`) and clients
(`gt.connect("HOST:PORT")`) on this machine find it by themselves, and every
other user is refused. --insecure runs without keys. Unknown flags are a usage
error (exit status 2).
"""

import argparse
import sys

from ._launch import exec_service

DEFAULT_PORT = 5555  # gt-dispatcher's own default endpoint's port


def build_args(argv=None):
    """The gt-dispatcher argument list for the command line `argv` (default:
    sys.argv[1:]). Exits with status 2 and a usage message on a bad one."""
    parser = argparse.ArgumentParser(
        prog="python -m gt.server",
        description="Start a gt dispatcher (gt-dispatcher) that workers and clients connect to.")
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT,
                        help=f"TCP port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: this machine only; without --key the "
                             "dispatcher uses this user's key set wherever it binds, docs/SECURITY.md)")
    parser.add_argument("-m", "--manifest", help="dispatcher manifest (YAML), e.g. configs/dispatcher-compile.yaml")
    parser.add_argument("--metrics", help="host:port serving Prometheus /metrics (default: none)")
    parser.add_argument("--discovery", help="host:port serving Prometheus HTTP service discovery")
    parser.add_argument("--id", help="instance id (default: the manifest's, else 'dispatcher')")
    parser.add_argument("--key", help="the dispatcher's CURVE key pair (gt keygen NAME writes NAME.key)")
    parser.add_argument("--client-keys", help="file or directory of the clients' public keys")
    parser.add_argument("--worker-keys", help="file or directory of the workers' public keys")
    parser.add_argument("--insecure", action="store_true",
                        help="run without keys (default: this user's key set): any peer that reaches the "
                             "address, every local user included, may then register as a worker")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"argument -p/--port: {args.port} is not a TCP port (1-65535)")
    out = ["--listen", f"tcp://{args.host}:{args.port}"]
    for flag in ("manifest", "metrics", "discovery", "id", "key", "client_keys", "worker_keys"):
        value = getattr(args, flag)
        if value is not None:
            out += [f"--{flag.replace('_', '-')}", value]
    if args.insecure:
        out.append("--insecure")
    return out


def main(argv=None):
    exec_service("python -m gt.server", "gt-dispatcher", build_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
