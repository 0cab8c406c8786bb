# shellcheck shell=bash
# launch-cluster.sh: the CURVE keys: made (or taken from --key-dir), the dispatcher's
# arguments, and each host's worker key files (sent over ssh where needed).
# Sourced by scripts/launch-cluster.sh, in its shell and at its point of the run
# (it sets and reads that script's variables); not a program of its own.

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
