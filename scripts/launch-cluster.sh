#!/usr/bin/env bash
# Starts a gt cluster on the hosts of a hostfile, over ssh (or in network
# namespaces), serves until Ctrl-C / SIGTERM / `stop`, then stops it all.
# `--help` for the usage; deploy/README.md ("ssh") for more.
set -euo pipefail

prog=launch-cluster

# The parts, beside this script (symbolic links to it resolved).
lib="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/launch-cluster"
# shellcheck source=lib/launch-cluster/usage.sh
. "$lib/usage.sh"

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

# shellcheck source=lib/launch-cluster/hostfile.sh
. "$lib/hostfile.sh"

# shellcheck source=lib/launch-cluster/remote.sh
. "$lib/remote.sh"

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

# shellcheck source=lib/launch-cluster/processes.sh
. "$lib/processes.sh"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# shellcheck source=lib/launch-cluster/keys.sh
. "$lib/keys.sh"

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
