#!/usr/bin/env bash
# Starts a gt cluster on the hosts of a hostfile, over ssh (or in network
# namespaces), serves until Ctrl-C / SIGTERM / `stop`, then stops it all.
# `--help` for the usage; deploy/README.md ("ssh") for more.
set -euo pipefail

prog=launch-cluster

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

# ---- options -------------------------------------------------------------------

command=start
if [ "${1:-}" = stop ] || [ "${1:-}" = start ]; then
  command=$1
  shift
fi
port=5555
metrics_port=9100
worker_metrics_port=9101
discovery_port=
bin_dir=
dispatcher_manifest=
worker_manifest=
bind_all=0
insecure=0
key_dir=
gt_cmd=
envs=()
exec_via=
ssh_cmd=${GT_SSH:-ssh -o BatchMode=yes}
run_dir=/tmp
log_dir=
wait_s=120
hostfile=

is_port() { [[ "$1" =~ ^[0-9]{1,5}$ ]] && [ "$1" -le 65535 ]; }

while [ "$#" -gt 0 ]; do
  opt=$1
  value=
  has_value=0
  if [[ "$opt" == --*=* ]]; then
    value=${opt#*=}
    opt=${opt%%=*}
    has_value=1
  fi
  case "$opt" in
    -h | --help) usage; exit 0 ;;
    --bind-all) bind_all=1; shift; continue ;;
    --insecure) insecure=1; shift; continue ;;
    -p | --port | --metrics-port | --worker-metrics-port | --discovery-port | --bin-dir | \
      --dispatcher-manifest | --worker-manifest | --env | --exec-via | --ssh | --run-dir | --log-dir | --wait | \
      --key-dir | --gt)
      if [ "$has_value" -eq 0 ]; then
        [ "$#" -ge 2 ] || usage_error "$opt needs a value"
        value=$2
        shift
      fi
      shift ;;
    --) shift; break ;;
    -*) usage_error "unknown option '$opt'" ;;
    *)
      [ -z "$hostfile" ] || usage_error "one HOSTFILE only (got '$hostfile' and '$opt')"
      hostfile=$opt
      shift
      continue ;;
  esac
  case "$opt" in
    -p | --port) port=$value ;;
    --metrics-port) metrics_port=$value ;;
    --worker-metrics-port) worker_metrics_port=$value ;;
    --discovery-port) discovery_port=$value ;;
    --bin-dir) bin_dir=$value ;;
    --dispatcher-manifest) dispatcher_manifest=$value ;;
    --worker-manifest) worker_manifest=$value ;;
    --env)
      [[ "$value" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "--env wants NAME=VALUE, got '$value'"
      envs+=("$value") ;;
    --exec-via) exec_via=$value ;;
    --ssh) ssh_cmd=$value ;;
    --run-dir) run_dir=$value ;;
    --log-dir) log_dir=$value ;;
    --wait) wait_s=$value ;;
    --key-dir) key_dir=$value ;;
    --gt) gt_cmd=$value ;;
  esac
done
if [ "$#" -gt 0 ]; then
  if [ -n "$hostfile" ] || [ "$#" -ne 1 ]; then usage_error "one HOSTFILE only"; fi
  hostfile=$1
fi
[ -n "$hostfile" ] || usage_error "no HOSTFILE given"
[ -r "$hostfile" ] || die "cannot read hostfile '$hostfile'"
for p in port metrics_port; do
  if ! is_port "${!p}" || [ "${!p}" -eq 0 ]; then usage_error "--${p//_/-}: expected a port number, got '${!p}'"; fi
done
[ "$worker_metrics_port" = none ] || is_port "$worker_metrics_port" ||
  usage_error "--worker-metrics-port: expected a port number, 0 or 'none', got '$worker_metrics_port'"
[ -z "$discovery_port" ] || is_port "$discovery_port" || usage_error "--discovery-port: expected a port number, got '$discovery_port'"
[[ "$wait_s" =~ ^[1-9][0-9]*$ ]] || usage_error "--wait: expected a number of seconds, got '$wait_s'"
[ "$insecure" -eq 0 ] || [ -z "$key_dir" ] || usage_error "--insecure and --key-dir: keys or none, not both"

# How a command runs on a host: exec_prefix (argv passed as is: ip netns
# exec, or GT_LAUNCH_EXEC) or ssh (argv quoted into one remote command line).
exec_prefix=()
case "$exec_via" in
  "")
    if [ -n "${GT_LAUNCH_EXEC:-}" ]; then
      read -r -a exec_prefix <<<"$GT_LAUNCH_EXEC"
      exec_via=prefix
    else
      exec_via=ssh
    fi ;;
  ssh) ;;
  netns) exec_prefix=(ip netns exec) ;;
  *) usage_error "--exec-via: expected ssh or netns, got '$exec_via'" ;;
esac
read -r -a ssh_argv <<<"$ssh_cmd"
[ "${#ssh_argv[@]}" -gt 0 ] || usage_error "--ssh: empty command"

# ---- the hostfile -------------------------------------------------------------------

hosts=()     # names, as in the hostfile
addrs=()     # the address each is reached at
counts=()    # gt-workers on each
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  line=${line%%#*}
  read -r -a words <<<"$line"
  [ "${#words[@]}" -gt 0 ] || continue
  name=${words[0]}
  [[ "$name" =~ ^[A-Za-z0-9_.@:%-]+$ ]] || die "$hostfile:$lineno: '$name' is not a host name"
  count=1
  addr=
  for word in "${words[@]:1}"; do
    case "$word" in
      workers=* | slots=*)
        count=${word#*=}
        [[ "$count" =~ ^[0-9]+$ ]] || die "$hostfile:$lineno: $word: expected a number of workers" ;;
      addr=*)
        addr=${word#addr=}
        [ -n "$addr" ] || die "$hostfile:$lineno: addr= needs an address" ;;
      *) die "$hostfile:$lineno: unknown '$word' (known: workers=N, slots=N, addr=ADDRESS)" ;;
    esac
  done
  for seen in "${hosts[@]+"${hosts[@]}"}"; do
    [ "$seen" != "$name" ] || die "$hostfile:$lineno: host '$name' is listed twice"
  done
  if [ -z "$addr" ]; then
    [ "$exec_via" = ssh ] || die "$hostfile:$lineno: '$name' needs addr=ADDRESS (its address: the name is a namespace's, not a host's)"
    addr=${name#*@}   # user@host for ssh
  fi
  hosts+=("$name")
  addrs+=("$addr")
  counts+=("$count")
done <"$hostfile"
[ "${#hosts[@]}" -gt 0 ] || die "$hostfile lists no host"
total=0
for c in "${counts[@]}"; do total=$((total + c)); done
[ "$total" -gt 0 ] || die "$hostfile: no workers (every line says workers=0)"
for ((h = 1; h < ${#hosts[@]}; h++)); do
  [ "${counts[h]}" -gt 0 ] || die "$hostfile: '${hosts[h]}' has workers=0: only the first host may (the dispatcher's)"
done

dispatcher_host=${hosts[0]}
dispatcher_addr=${addrs[0]}
# An IPv6 address is bracketed in endpoints.
dispatcher_ep=$dispatcher_addr
[[ "$dispatcher_ep" == *:* ]] && dispatcher_ep="[$dispatcher_ep]"
bin=${bin_dir:+${bin_dir%/}/}

pidfile() { echo "${run_dir%/}/gt-launch-$port-$1.pid"; }
# Over ssh, where a host keeps the key files it was sent.
remote_key_dir="${run_dir%/}/gt-launch-$port-keys"

# Sets run_argv to the command that runs "$@" on host $1.
set_run_argv() {
  local host=$1
  shift
  if [ "$exec_via" = ssh ]; then
    local quoted
    printf -v quoted '%q ' "$@"
    run_argv=("${ssh_argv[@]}" "$host" "$quoted")
  else
    run_argv=("${exec_prefix[@]}" "$host" "$@")
  fi
}
run_on() {
  local run_argv
  set_run_argv "$@"
  "${run_argv[@]}"
}

# Run on a host: SIGTERM the gt processes the pid files $3... name, wait up
# to $2 s (a zombie counts as gone: its parent may be this script's child),
# SIGKILL what is left, remove the files. $1: the signal name for the log.
# shellcheck disable=SC2016  # expanded on the host
STOP_SNIPPET='
alive() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }
is_gt() { case $(cat "/proc/$1/comm" 2>/dev/null) in gt-*) return 0 ;; esac; return 1; }
t=$1; shift; pids=()
for f in "$@"; do
  [ -f "$f" ] || continue
  pid=$(cat "$f" 2>/dev/null) || continue
  [[ "$pid" =~ ^[0-9]+$ ]] && is_gt "$pid" && alive "$pid" || continue
  id=${f##*/}; id=${id#gt-launch-}; id=${id#*-}; id=${id%.pid}
  echo "launch-cluster: stopping $id (pid $pid)" >&2
  kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
done
end=$((SECONDS + t))
for pid in "${pids[@]+"${pids[@]}"}"; do
  while alive "$pid" && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
  if alive "$pid" && is_gt "$pid"; then echo "pid $pid still running after ${t}s: SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null || true; fi
done
rm -f -- "$@"'

# Stops the given processes ("HOSTINDEX:ID" each) on their hosts, the hosts
# in parallel.
stop_on_hosts() {
  local h item files pids=()
  for ((h = 0; h < ${#hosts[@]}; h++)); do
    files=()
    for item in "$@"; do
      [ "${item%%:*}" = "$h" ] && files+=("$(pidfile "${item#*:}")")
    done
    [ "${#files[@]}" -gt 0 ] || continue
    run_on "${hosts[h]}" bash -c "$STOP_SNIPPET" stop 15 "${files[@]}" &
    pids+=($!)
  done
  local rc=0
  for h in "${pids[@]+"${pids[@]}"}"; do wait "$h" || rc=1; done
  return "$rc"
}

# Over ssh: removes the key files sent to the given hosts (indexes), in parallel.
remove_remote_keys() {
  [ "$exec_via" = ssh ] || return 0
  local h pids=() rc=0
  for h in "$@"; do
    run_on "${hosts[h]}" rm -rf -- "$remote_key_dir" &
    pids+=($!)
  done
  for h in "${pids[@]+"${pids[@]}"}"; do wait "$h" || rc=1; done
  return "$rc"
}

# Every process of the hostfile, as HOSTINDEX:ID: the workers, then the dispatcher.
worker_items=()
worker_ids=()
for ((h = 0; h < ${#hosts[@]}; h++)); do
  for ((k = 0; k < counts[h]; k++)); do
    worker_items+=("$h:${hosts[h]}-$k")
    worker_ids+=("${hosts[h]}-$k")
  done
done
dispatcher_item="0:dispatcher"

if [ "$command" = stop ]; then
  rc=0
  stop_on_hosts "${worker_items[@]}" || rc=1
  stop_on_hosts "$dispatcher_item" || rc=1
  all_hosts=()
  for ((h = 0; h < ${#hosts[@]}; h++)); do all_hosts+=("$h"); done
  remove_remote_keys "${all_hosts[@]}" || rc=1
  [ "$rc" -eq 0 ] || die "could not reach every host to stop its processes"
  echo "$prog: stopped the cluster of $hostfile (port $port)"
  exit 0
fi

# ---- start ----------------------------------------------------------------------------

[ -z "$log_dir" ] || mkdir -p "$log_dir"
local_pids=()   # the local processes (ssh clients, or the gt processes themselves under ip netns exec)
started=()      # HOSTINDEX:ID of each started process
keyed_hosts=()  # indexes of the hosts key files were sent to (ssh)
made_key_dir=   # the temporary key directory this script made (removed on exit)

# Starts "$@" on host $1 as process $2 (an id), its pid in its pid file there.
start_process() {
  local h=$1 id=$2
  shift 2
  local run_argv
  # $$ of this bash is the gt process's pid: exec env, exec gt-*.
  # shellcheck disable=SC2016  # expanded on the host
  set_run_argv "${hosts[h]}" bash -c 'echo "$$" >"$1" && shift && exec env "$@"' gt-launch "$(pidfile "$id")" \
    "${envs[@]+"${envs[@]}"}" "$@"
  if [ -n "$log_dir" ]; then
    "${run_argv[@]}" </dev/null >"$log_dir/$id.log" 2>&1 &
  else
    "${run_argv[@]}" </dev/null > >(sed -u "s/^/[$id] /" >&2) 2>&1 &
  fi
  local_pids+=($!)
  started+=("$h:$id")
}

# Whether local process $1 still runs; one that exited but was not waited
# for yet (a zombie) does not.
running() {
  local s
  if [ -r "/proc/$1/stat" ]; then
    s=$(<"/proc/$1/stat") || return 1
    s=${s##*) }
    [ "${s%% *}" != Z ]
  else
    kill -0 "$1" 2>/dev/null
  fi
}

# shellcheck disable=SC2317  # the EXIT trap
cleanup() {
  local rc=$?
  trap '' INT TERM
  trap - EXIT
  if [ "${#started[@]}" -gt 0 ]; then
    echo "$prog: stopping ${#started[@]} processes" >&2
    local workers=() item
    for item in "${started[@]}"; do [ "$item" = "$dispatcher_item" ] || workers+=("$item"); done
    # Workers first, so that each says goodbye to a dispatcher still there.
    [ "${#workers[@]}" -eq 0 ] || stop_on_hosts "${workers[@]}" || true
    stop_on_hosts "$dispatcher_item" || true
    # The local ends (ssh clients) end with their remote commands; whatever
    # has not (an unreachable host) is ended here.
    local pid deadline=$((SECONDS + 5))
    for pid in "${local_pids[@]}"; do
      while running "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
  fi
  [ "${#keyed_hosts[@]}" -eq 0 ] || remove_remote_keys "${keyed_hosts[@]}" || true
  [ -z "$made_key_dir" ] || rm -rf -- "$made_key_dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# ---- keys ----------------------------------------------------------------------------

# Prints the local gt that makes keys.
find_gt() {
  if [ -n "$gt_cmd" ]; then
    local found
    found=$(command -v -- "$gt_cmd" 2>/dev/null) && [ -f "$found" ] || die "--gt $gt_cmd: no such command here"
    echo "$found"
    return 0
  fi
  local candidate
  for candidate in "${bin:+${bin}gt}" "$(command -v gt 2>/dev/null || true)" \
    "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/bin/gt"; do
    if [ -n "$candidate" ] && [ -f "$candidate" ] && [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  die "no gt here to make keys with (gt keygen): give --gt PATH, --key-dir DIR holding a key set, or --insecure"
}

# Makes the pairs "$@" (paths without .key/.pub) in key_dir that are not there yet.
make_keys() {
  local name missing=()
  for name in "$@"; do
    [ -e "$key_dir/$name.key" ] || [ -e "$key_dir/$name.pub" ] || missing+=("$key_dir/$name")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  local gt
  gt=$(find_gt) || exit 1
  "$gt" keygen "${missing[@]}" >/dev/null || die "$gt keygen failed"
}

# Over ssh: writes stdin to file $2 of host $1's key directory (private, this user's).
# shellcheck disable=SC2016  # expanded on the host
SEND_SNIPPET='umask 077 && mkdir -p -- "$1" && [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] ||
  { echo "$1 is not a directory of this user" >&2; exit 1; }
chmod 700 -- "$1" && cat >"$1/$2"'
send_key_file() {
  run_on "${hosts[$1]}" bash -c "$SEND_SNIPPET" send-key "$remote_key_dir" "$2" ||
    die "could not copy $2 to ${hosts[$1]}:$remote_key_dir"
}

dispatcher_key_args=()
worker_key_files=()  # per host index: its workers' --key, as the host sees it
server_key_file=     # the workers' --server-key, as the hosts see it
if [ "$insecure" -eq 1 ]; then
  dispatcher_key_args=(--insecure)
  echo "$prog: --insecure: no keys; any peer that reaches the dispatcher may register as a worker or open a session" >&2
else
  if [ -z "$key_dir" ]; then
    made_key_dir=$(mktemp -d "${TMPDIR:-/tmp}/gt-launch-keys.XXXXXX") || die "cannot make a temporary key directory"
    key_dir=$made_key_dir
  fi
  (umask 077 && mkdir -p -- "$key_dir/workers" "$key_dir/clients") || die "cannot make the key directory $key_dir"
  key_dir=$(cd -- "$key_dir" && pwd)
  [ -z "$made_key_dir" ] || made_key_dir=$key_dir
  names=(dispatcher clients/client)
  for ((h = 0; h < ${#hosts[@]}; h++)); do
    [ "${counts[h]}" -eq 0 ] || names+=("workers/${hosts[h]}")
  done
  make_keys "${names[@]}"
  if [ "$exec_via" = ssh ]; then
    # Each host gets what it needs: the dispatcher's its key pair and the
    # allow-lists (the .pub files of each directory, one file each), a
    # worker host its workers' key pair and the dispatcher's public key.
    keyed_hosts+=(0)
    send_key_file 0 dispatcher.key <"$key_dir/dispatcher.key"
    cat "$key_dir"/clients/*.pub | send_key_file 0 clients.pub
    cat "$key_dir"/workers/*.pub | send_key_file 0 workers.pub
    dispatcher_key_args=(--key "$remote_key_dir/dispatcher.key" --client-keys "$remote_key_dir/clients.pub"
      --worker-keys "$remote_key_dir/workers.pub")
    for ((h = 0; h < ${#hosts[@]}; h++)); do
      [ "${counts[h]}" -gt 0 ] || continue
      [ "$h" -eq 0 ] || keyed_hosts+=("$h")
      send_key_file "$h" "worker-${hosts[h]}.key" <"$key_dir/workers/${hosts[h]}.key"
      send_key_file "$h" dispatcher.pub <"$key_dir/dispatcher.pub"
      worker_key_files[h]=$remote_key_dir/worker-${hosts[h]}.key
    done
    server_key_file=$remote_key_dir/dispatcher.pub
  else
    dispatcher_key_args=(--key "$key_dir/dispatcher.key" --client-keys "$key_dir/clients"
      --worker-keys "$key_dir/workers")
    for ((h = 0; h < ${#hosts[@]}; h++)); do worker_key_files[h]=$key_dir/workers/${hosts[h]}.key; done
    server_key_file=$key_dir/dispatcher.pub
  fi
fi

# ---- the processes ------------------------------------------------------------------

listen_host=$dispatcher_ep
[ "$bind_all" -eq 0 ] || listen_host=0.0.0.0
dispatcher_args=(--listen "tcp://$listen_host:$port" --metrics "$listen_host:$metrics_port" --id dispatcher
  "${dispatcher_key_args[@]}")
[ -z "$dispatcher_manifest" ] || dispatcher_args+=(--manifest "$dispatcher_manifest")
[ -z "$discovery_port" ] || dispatcher_args+=(--discovery "$listen_host:$discovery_port")
start_process 0 dispatcher "${bin}gt-dispatcher" "${dispatcher_args[@]}"
dispatcher_pid=${local_pids[0]}
echo "$prog: dispatcher on $dispatcher_host, listening on tcp://$listen_host:$port"

i=0
for ((h = 0; h < ${#hosts[@]}; h++)); do
  addr=${addrs[h]}
  [[ "$addr" == *:* ]] && addr="[$addr]"
  for ((k = 0; k < counts[h]; k++)); do
    id=${worker_ids[i]}
    worker_args=(--connect "$dispatcher_ep:$port" --id "$id")
    [ "$insecure" -eq 1 ] || worker_args+=(--key "${worker_key_files[h]}" --server-key "$server_key_file")
    [ -z "$worker_manifest" ] || worker_args+=(--manifest "$worker_manifest")
    if [ "$worker_metrics_port" != none ]; then
      wport=$worker_metrics_port
      [ "$wport" -eq 0 ] || wport=$((wport + k))
      worker_args+=(--metrics "$addr:$wport")
    fi
    start_process "$h" "$id" "${bin}gt-worker" "${worker_args[@]}"
    i=$((i + 1))
  done
done

# The dispatcher's count of live workers, scraped on its host (the address
# may be reachable from nowhere else, e.g. from outside a namespace).
# shellcheck disable=SC2016  # expanded on the host
SCRAPE_SNIPPET='
if command -v curl >/dev/null 2>&1; then
  curl -fsS --max-time 2 "http://$2:$3/metrics"
else
  exec 3<>"/dev/tcp/$1/$3" && printf "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" >&3 && timeout 2 cat <&3
fi'
workers_connected() {
  { run_on "$dispatcher_host" bash -c "$SCRAPE_SNIPPET" scrape "$dispatcher_addr" "$dispatcher_ep" "$metrics_port" \
    2>/dev/null || true; } |
    awk '/^gt_host_workers_connected[{ ]/ { n += $NF } END { print n + 0 }'
}

deadline=$((SECONDS + wait_s))
while :; do
  connected=$(workers_connected)
  [ "$connected" -ge "$total" ] && break
  for ((j = 0; j < ${#local_pids[@]}; j++)); do
    running "${local_pids[j]}" || die "${started[j]#*:} on ${hosts[${started[j]%%:*}]} exited before every worker registered ($connected of $total)"
  done
  [ "$SECONDS" -lt "$deadline" ] || die "only $connected of $total workers registered within ${wait_s}s"
  sleep 0.5
done
echo "$prog: $total workers registered: ${worker_ids[*]}"
if [ "$insecure" -eq 0 ]; then
  printf 'export GT_CLIENT_KEY=%q\nexport GT_SERVER_KEY=%q\n' "$key_dir/clients/client.key" "$key_dir/dispatcher.pub"
fi
echo "gt.connect(\"$dispatcher_ep:$port\")"

# Serve until a signal (the traps) or the dispatcher's end (`stop`).
set +e
wait "$dispatcher_pid"
rc=$?
set -e
echo "$prog: the dispatcher ended (status $rc)" >&2
exit "$rc"
