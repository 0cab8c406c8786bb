# shellcheck shell=bash
# launch-cluster.sh: running a command on a host (ssh or an exec prefix), stopping gt processes
# there by their pid files, and removing the key files sent to hosts.
# Sourced by scripts/launch-cluster.sh, in its shell and at its point of the run
# (it sets and reads that script's variables); not a program of its own.

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
