# Part of Scripts/relay-cluster, which sources it: `stop`, and the waits and signals it and `restart` use.
# Not run on its own: the entry point has checked the arguments and set `dir`, `command` and the
# options first.

# relay_stop_seconds: how long `stop` waits for the relays after SIGTERM: 10 s, or more when a relay
# was started with a --close-timeout that needs it (it waits that long for each close frame's
# answer, so a SIGKILL at 10 s would cut the 1001 closes short). Read from DIR/relay-*.cmd.
relay_stop_seconds() {
    local seconds=10 file argv i value
    for file in "$dir"/relay-*.cmd; do
        [ -f "$file" ] || continue
        mapfile -d '' -t argv <"$file"
        for i in "${!argv[@]}"; do
            value=
            case "${argv[$i]}" in
                --close-timeout) value=${argv[$((i + 1))]:-} ;;
                --close-timeout=*) value=${argv[$i]#--close-timeout=} ;;
            esac
            # The relay checked the value when it started (any number its parser reads, 1e2 too):
            # rounded to whole seconds, plus 6.
            if [ -n "$value" ] && value=$(LC_ALL=C printf '%.0f' "$value" 2>/dev/null) && [[ "$value" =~ ^[0-9]{1,6}$ ]]; then
                [ $((10#$value + 6)) -gt "$seconds" ] && seconds=$((10#$value + 6))
            fi
        done
    done
    echo "$seconds"
}

# end SIGNAL SECONDS NAME PID [NAME PID …]: sends SIGNAL (TERM, or QUIT for nginx's graceful
# shutdown) to each and waits up to SECONDS for them to end; then SIGTERM to whatever is left (if
# SIGNAL was another) with 5 s more, then SIGKILL (an nginx master together with its workers, which
# would otherwise keep serving the ports) with 2 s more. Says which needed a fallback; appends
# "NAME (pid PID[, killed])" to `ended` for each that is gone and "NAME (pid PID)" to `left` for
# each still running.
end() {
    local signal=$1 seconds=$2 names=() pids=() workers=() killed=() i pid waited
    shift 2
    while [ $# -ge 2 ]; do names+=("$1"); pids+=("$2"); shift 2; done
    for pid in "${pids[@]}"; do kill -"$signal" "$pid" 2>/dev/null || true; done
    waited="$seconds s of SIG$signal"
    if ! wait_gone $((seconds * 10)) "${pids[@]}" && [ "$signal" != TERM ]; then
        for i in "${!pids[@]}"; do
            pid=${pids[$i]}
            alive "$pid" || continue
            echo "relay-cluster: ${names[$i]} (pid $pid) did not exit within $waited; sending SIGTERM" >&2
            kill -TERM "$pid" 2>/dev/null || true
        done
        waited="5 s of SIGTERM"
        wait_gone 50 "${pids[@]}" || true
    fi
    local any=0
    for pid in "${pids[@]}"; do if alive "$pid"; then any=1; fi; done
    if [ $any -eq 1 ]; then
        for i in "${!pids[@]}"; do
            pid=${pids[$i]}
            alive "$pid" || continue
            if [ "${names[$i]}" = nginx ]; then
                local worker
                for worker in $(children "$pid"); do workers+=("$worker"); done
            fi
            echo "relay-cluster: ${names[$i]} (pid $pid) did not exit within $waited; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            killed[i]=1
        done
        for pid in ${workers[@]+"${workers[@]}"}; do kill -KILL "$pid" 2>/dev/null || true; done
        wait_gone 20 "${pids[@]}" ${workers[@]+"${workers[@]}"} || true
    fi
    for i in "${!pids[@]}"; do
        pid=${pids[$i]}
        if alive "$pid"; then
            left+=("${names[$i]} (pid $pid)")
        else
            ended+=("${names[$i]} (pid $pid${killed[i]:+, killed})")
        fi
    done
    for pid in ${workers[@]+"${workers[@]}"}; do
        if alive "$pid"; then left+=("nginx worker (pid $pid)"); fi
    done
    return 0
}

# watch_stderr NAME PID: opens relay NAME's stderr (through /proc, so a DIR/NAME.err that was
# removed or moved is read all the same) and notes its size; report_stopping reads what follows.
# Sets watched_fd[NAME] and watched_size[NAME]; nothing when it cannot be opened.
declare -A watched_fd=() watched_size=()
watch_stderr() {
    local fd
    [ -r "/proc/$2/fd/2" ] || return 0
    exec {fd}<"/proc/$2/fd/2" || return 0
    watched_fd[$1]=$fd
    watched_size[$1]=$(stat -L -c %s "/proc/$2/fd/2" 2>/dev/null || echo 0)
}

# report_stopping NAME: says on stderr what relay NAME wrote to its stderr since watch_stderr (while
# it stopped; at most 20 lines) and closes it; status 1 when that holds an error line (the relay's
# own `error: …`, or a log line at level error).
report_stopping() {
    local said fd=${watched_fd[$1]:-}
    [ -n "$fd" ] || return 0
    said=$(tail -c +$((watched_size[$1] + 1)) <&"$fd" | head -n 20 || true)
    exec {fd}<&-
    unset "watched_fd[$1]"
    [ -n "$said" ] || return 0
    echo "relay-cluster: $1 wrote while stopping (its stderr, $dir/$1.err):" >&2
    sed 's/^/  /' <<<"$said" >&2
    ! grep -qE '^error:|^[^ ]+ error ' <<<"$said"
}

# space_problem: prints a line when DIR's filesystem has no room left for what the relays write there
# (each contact file is replaced whole; their stderr is DIR/relay-I.err): fewer than 64 KiB, or twice
# the largest contact file, or 16 inodes free. Status 0 when it printed one. A relay on a full disk
# cannot save its contact file, and the error it logs about that goes to a file on the same disk:
# both are lost unseen, so this is said from here.
space_problem() {
    local free inodes need=64 size f
    free=$(df -Pk "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }') || return 1
    inodes=$(df -Pi "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }') || inodes=""
    [[ "$free" =~ ^[0-9]+$ ]] || return 1
    for f in "$dir"/contacts-*.json; do
        [ -f "$f" ] || continue
        size=$((($(stat -c %s "$f") * 2 + 1023) / 1024))
        [ "$size" -gt "$need" ] && need=$size
    done
    if [ "$free" -lt "$need" ]; then
        echo "relay-cluster: $dir has $free KiB free (its filesystem is full): the relays cannot save their contact files there, nor write their errors to relay-I.err, so both are lost unseen; free some space"
    elif [[ "$inodes" =~ ^[0-9]+$ ]] && [ "$inodes" -lt 16 ]; then
        echo "relay-cluster: $dir's filesystem has $inodes inodes free: the relays cannot save their contact files there (each save makes a new file); free some"
    else
        return 1
    fi
}

# say_killed: says on stderr, for each relay in `ended` that `end` had to kill (SIGKILL: it was frozen
# by SIGSTOP or a debugger, or stuck), that it could neither save its contact file nor close its
# tunnels. Status 0 when there was one.
say_killed() {
    local entry name pid any=1
    for entry in ${ended[@]+"${ended[@]}"}; do
        [[ "$entry" =~ ^(relay-([0-9]+))\ \(pid\ ([0-9]+),\ killed\)$ ]] || continue
        name=${BASH_REMATCH[1]} pid=${BASH_REMATCH[3]}
        echo "relay-cluster: $name (pid $pid) did not end on SIGTERM (frozen by SIGSTOP or a debugger, or stuck) and was killed: it could not save its contact file ($dir/contacts-${BASH_REMATCH[2]}.json keeps what it saved before: a phone linked since then is forgotten) nor close its tunnels" >&2
        any=0
    done
    return $any
}

# stop: the relays first, so that each closes its tunnels with 1001 ("relay shutting down") through
# nginx, which is still there to carry the close frames; then nginx, gracefully (SIGQUIT: it stops
# accepting and lets its connections end, bounded by worker_shutdown_timeout in nginx.conf), which
# the earlier SIGTERM-to-everything cut short (clients saw 1006). The log filter ends by itself.
stop() {
    local pidfile pid name kind i master="" relays=() proxy=() seen=" " logger="" missing=0
    ended=() left=() relay_stop_errors=0
    [ -d "$dir" ] || missing=1
    if master=$(nginx_master); then proxy+=(nginx "$master"); seen+="$master "; fi
    for pidfile in "$dir/nginx.pid" "$dir"/relay-*.pid; do
        [ -f "$pidfile" ] || continue
        name=$(basename "$pidfile" .pid)
        if [ "$name" = nginx ] && [ -n "$master" ] && [ "$(cat "$pidfile" 2>/dev/null)" = "$master" ]; then continue; fi
        if [ "$name" != nginx ] && pid=$(ours "$pidfile"); then
            relays+=("$name" "$pid")
            seen+="$pid "
            continue
        fi
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid"; then
            echo "relay-cluster: $(basename "$pidfile") names pid $pid, which is not this cluster's process any more; left alone" >&2
        fi
        rm -f "$pidfile"
    done
    # What no pid file names: workers of an nginx master that is gone, relays whose pid file (or DIR)
    # was removed.
    while read -r kind pid; do
        [[ "$seen" == *" $pid "* ]] && continue
        case "$kind" in
            relay-*) relays+=("$kind" "$pid") ;;
            nginx-worker)
                [ -n "$master" ] && [ "$(parent "$pid")" = "$master" ] && continue
                proxy+=("nginx worker" "$pid") ;;
            nginx-log) logger=$pid ;;
        esac
        seen+="$pid "
    done < <(strays)
    if [ $missing -eq 1 ]; then
        if [ ${#relays[@]} -eq 0 ] && [ ${#proxy[@]} -eq 0 ] && [ -z "$logger" ]; then
            echo "relay-cluster: nothing to stop ($dir does not exist, and no relay or nginx has files open there)"
            return 0
        fi
        echo "relay-cluster: $dir does not exist, but processes of its cluster still run (found by the files they hold open there); stopping them"
    fi
    # What each relay writes to its DIR/relay-I.err while it stops is said here: at `warning` a
    # clean stop writes nothing, and a relay that could not save its contact file (exit 1) says so
    # there only (the relays are not this script's children, so their exit status is not seen).
    for ((i = 0; i < ${#relays[@]}; i += 2)); do watch_stderr "${relays[$i]}" "${relays[$((i + 1))]}"; done
    if [ ${#relays[@]} -gt 0 ]; then end TERM "$(relay_stop_seconds)" "${relays[@]}"; fi
    for ((i = 0; i < ${#relays[@]}; i += 2)); do report_stopping "${relays[$i]}" || relay_stop_errors=1; done
    if [ ${#proxy[@]} -gt 0 ]; then end QUIT 10 "${proxy[@]}"; fi
    # The log filter ends by itself once nginx is gone (its input ends); one still there (nginx
    # never started, or a worker survived) is ended too.
    if pid=$(ours "$dir/nginx-log.pid") || { pid=$logger; [ -n "$pid" ]; }; then
        wait_gone 20 "$pid" || end TERM 5 nginx-log "$pid"
    fi
    # Pid files go with their processes; the pid file of anything still running stays.
    for name in nginx nginx-log "$dir"/relay-*.pid; do
        name=$(basename "$name" .pid)
        [ -f "$dir/$name.pid" ] || continue
        if [ ${#left[@]} -gt 0 ] && [[ " ${left[*]} " == *" $name (pid "* || ( "$name" = nginx && " ${left[*]} " == *" nginx worker (pid "* ) ]]; then continue; fi
        rm -f "$dir/$name.pid"
    done
    if [ $missing -eq 0 ] && ! [ -f "$dir/nginx-log.pid" ]; then rm -f "$dir/nginx-error.pipe"; fi
    if [ ${#ended[@]} -gt 0 ]; then
        echo "relay-cluster: stopped $(joined "${ended[@]}")"
    elif [ ${#left[@]} -eq 0 ]; then
        echo "relay-cluster: nothing was running in $dir"
    fi
    if [ ${#left[@]} -gt 0 ]; then
        echo "relay-cluster: still running after SIGKILL: $(joined "${left[@]}"); kept the pid file of each in $dir" >&2
        return 1
    fi
    return 0
}
