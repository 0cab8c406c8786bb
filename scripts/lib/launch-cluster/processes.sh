# shellcheck shell=bash
# launch-cluster.sh: starting a process on a host, whether a local one runs, and the cleanup
# (the EXIT trap) that stops everything started.
# Sourced by scripts/launch-cluster.sh, in its shell and at its point of the run
# (it sets and reads that script's variables); not a program of its own.

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
