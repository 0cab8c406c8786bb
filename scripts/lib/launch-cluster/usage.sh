# shellcheck shell=bash
# launch-cluster.sh: the usage text and the two ways out on an error (die, usage_error).
# Sourced by scripts/launch-cluster.sh, in its shell and at its point of the run
# (it sets and reads that script's variables); not a program of its own.

usage() {
  cat <<'EOF'
Usage: scripts/launch-cluster.sh [OPTIONS] HOSTFILE        start, serve until stopped
       scripts/launch-cluster.sh stop [OPTIONS] HOSTFILE   stop a cluster started so

The first host of HOSTFILE runs gt-dispatcher; every host, the first one
included, runs gt-worker (one each, unless its line says otherwise), with id
HOST-K (K = 0, 1, ... on that host) and --connect DISPATCHER:PORT. Once every
worker has registered the script prints what a client uses,
    export GT_CLIENT_KEY=KEYDIR/clients/client.key
    export GT_SERVER_KEY=KEYDIR/dispatcher.pub
    gt.connect("DISPATCHER:PORT")
and serves until Ctrl-C or SIGTERM (or until the dispatcher ends, e.g. by
`stop` from another shell); then it stops the workers, then the dispatcher.
Worker indexes follow registration order, not the hostfile's.

Keys: every connection is authenticated with CURVE (docs/SECURITY.md). The
script makes a key set here with `gt keygen` (KEYDIR: --key-dir, else a new
private temporary directory, removed when the script ends):
    dispatcher.key/.pub, workers/HOST.key/.pub (one pair per worker host),
    clients/client.key/.pub
Only a key in workers/ may register as a worker, only a .pub in clients/ open
a client session. Over ssh each host gets the files it needs, copied with the
ssh command into RUN_DIR/gt-launch-PORT-keys/ (mode 0700), removed when its
processes stop; with --exec-via netns or GT_LAUNCH_EXEC the hosts share this
file system and use KEYDIR's files where they are.

HOSTFILE: one host a line; '#' starts a comment; blank lines are skipped.
    HOST [workers=N | slots=N] [addr=ADDRESS]
  workers=N (slots=N is the same, as in MPI hostfiles): gt-workers on that
    host, default 1; workers=0 on the first line: a dispatcher-only host.
  addr=ADDRESS: the address the other hosts reach this one at, which its
    services bind (default: HOST). Give an IP address when HOST is an ssh
    alias, or when HOST resolves to 127.0.1.1 on the host itself (Debian's
    /etc/hosts does that): a service bound to loopback is unreachable.

Options (a value may also be given as --opt=VALUE):
  -p, --port PORT           the dispatcher's ZeroMQ port (5555)
  --metrics-port PORT       the dispatcher's /metrics port (9100); the script
                            scrapes it, on the first host, to see workers register
  --worker-metrics-port P   a worker's /metrics port (9101); the K-th worker of
                            a host uses P+K; 0: any free port; 'none': no /metrics
  --discovery-port PORT     the dispatcher's Prometheus service discovery
                            (GET /targets); default: none
  --bin-dir DIR             where gt-dispatcher / gt-worker are on the hosts
                            (default: on PATH there)
  --dispatcher-manifest F   --manifest for gt-dispatcher (a path on the first host)
  --worker-manifest F       --manifest for every gt-worker (a path on each host)
  --bind-all                the dispatcher binds 0.0.0.0 rather than its address
  --key-dir DIR             the key set's directory here: made (mode 0700) if
                            missing, the missing pairs made, an existing pair
                            used as it is, kept afterwards. Add a client with
                            `gt keygen DIR/clients/NAME` before starting
  --insecure                no keys: the dispatcher accepts any peer that
                            reaches it, as a worker or a client (gt-dispatcher
                            --insecure); only on a network you trust
  --gt PATH                 the gt command that makes keys here (default:
                            BIN_DIR/gt if it is here, gt on PATH, else this
                            checkout's build/bin/gt)
  --env NAME=VALUE          set in every gt process's environment (repeatable)
  --exec-via ssh|netns      how a command runs on a host: `ssh HOST CMD` (the
                            default) or `ip netns exec HOST CMD`, where HOST is
                            a network namespace and addr= its address (required)
  --ssh CMD                 the ssh command (default: ssh -o BatchMode=yes);
                            $GT_SSH too
  --run-dir DIR             where, on each host, the pid files go (/tmp)
  --log-dir DIR             write each process's output to DIR/ID.log here;
                            default: to this script's stderr, lines prefixed [ID]
  --wait SECONDS            how long to wait for every worker to register (120)
  -h, --help                this text

Environment: GT_LAUNCH_EXEC, a command prefix that runs argv on a host, used
instead of ssh as `$GT_LAUNCH_EXEC HOST CMD...` (GT_LAUNCH_EXEC="ip netns exec"
is --exec-via netns). The hosts need bash; the first one curl (else bash's
/dev/tcp is used). Each gt process writes its pid to RUN_DIR/gt-launch-PORT-ID.pid
on its host; `stop` (same HOSTFILE, --port, --run-dir, --exec-via) stops the
processes those files name (only if they are still gt-* processes): SIGTERM,
SIGKILL after 15 s.
EOF
}

die() {
  echo "$prog: $*" >&2
  exit 1
}
usage_error() {
  echo "$prog: $*" >&2
  echo "Try '$0 --help'." >&2
  exit 2
}
