# shellcheck shell=bash
# launch-cluster.sh: reading the hostfile into hosts, addrs and counts, and the dispatcher's
# address and endpoint.
# Sourced by scripts/launch-cluster.sh, in its shell and at its point of the run
# (it sets and reads that script's variables); not a program of its own.

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
