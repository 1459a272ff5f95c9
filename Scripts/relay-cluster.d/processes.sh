# Part of Scripts/relay-cluster, which sources it: the lock, the relay binary, and finding the cluster's processes.
# Not run on its own: the entry point has checked the arguments and set `dir`, `command` and the
# options first.

# lock: one start, stop or restart at a time in DIR (two `start`s at once would each start relays,
# and one's pid files would hide the other's). Held on descriptor 9 until this script exits; every
# process the script leaves running is started with 9 closed, or it would hold the lock for good.
# No DIR, no lock: there is nothing in it to share (`start` creates DIR first).
lock() {
    [ -d "$dir" ] || return 0
    command -v flock >/dev/null || { echo "relay-cluster: flock(1) is missing (Debian package util-linux)" >&2; exit 1; }
    if ! { exec 9>>"$dir/.lock"; } 2>/dev/null; then
        echo "relay-cluster: cannot open $dir/.lock to lock $dir" >&2
        exit 1
    fi
    if ! flock -n 9; then
        echo "relay-cluster: another relay-cluster start, stop or restart is running in $dir (it holds $dir/.lock); wait for it to finish" >&2
        exit 3
    fi
}

# cluster_directory: status 0 when DIR holds a file a `start` writes (the lock, nginx.conf, a pid,
# command or output file, a contact file, nginx's log), so `stop` and `restart` may lock it and
# remove pid files there; a directory holding none of them is someone else's, where they write
# nothing.
cluster_directory() {
    local f
    for f in "$dir/.lock" "$dir/nginx.conf" "$dir/nginx.pid" "$dir/nginx-log.pid" "$dir/nginx-error.log" \
        "$dir"/relay-*.pid "$dir"/relay-*.cmd "$dir"/relay-*.out "$dir"/contacts-*.json; do
        [ -e "$f" ] && return 0
    done
    return 1
}

# lock_holder: what holds DIR/.lock now (a start, stop or restart in progress), without taking the
# lock (a `status` that took it, even for a moment, could make a start beginning then exit 3): the
# lock is in /proc/locks by the file's inode (under the pid of the flock(1) that took it, which has
# exited), and its holder is the process that has the file open: "a \`relay-cluster start\` (pid N)",
# or "pid N (its command line)" for another program. Status 1 when nothing holds it.
lock_holder() {
    local inode pid words=() i other=""
    [ -f "$dir/.lock" ] || return 1
    inode=$(stat -c %i "$dir/.lock" 2>/dev/null) || return 1
    # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the number.
    awk -v inode="$inode" '$2 == "FLOCK" { split($6, id, ":"); if (id[3] == inode) { found = 1; exit } } END { exit !found }' \
        /proc/locks 2>/dev/null || return 1
    local pattern
    pattern=$(printf '%s' "$dir/.lock" | sed 's/[][*?\\]/\\&/g')
    for pid in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$pattern" -printf '%h\n' 2>/dev/null | sed 's#^/proc/\([0-9]*\)/fd$#\1#' | sort -nu); do
        [ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] || continue
        words=()
        mapfile -d '' -t words <"/proc/$pid/cmdline" 2>/dev/null || continue
        for i in "${!words[@]}"; do
            if [ "${words[$i]##*/}" = relay-cluster ] && [ -n "${words[$((i + 1))]:-}" ]; then
                echo "a \`relay-cluster ${words[$((i + 1))]}\` (pid $pid)"
                return 0
            fi
        done
        [ -n "$other" ] || other="a start, stop or restart (pid $pid: $(printf '%s ' "${words[@]}" | head -c 80 | sed 's/ *$//'))"
    done
    echo "${other:-a process that has it open no more}"
}

binary() {
    if [ -n "${HYBRID_SIM:-}" ]; then
        [ -f "$HYBRID_SIM" ] && [ -x "$HYBRID_SIM" ] || { echo "relay-cluster: HYBRID_SIM=$HYBRID_SIM is not an executable file" >&2; exit 1; }
        realpath -- "$HYBRID_SIM"
        return
    fi
    # The newer of the two builds: after a `swift build` the release binary may be days old.
    local newest="" candidate
    for candidate in .build/release/hybrid-sim .build/debug/hybrid-sim; do
        if [ -x "$candidate" ] && { [ -z "$newest" ] || [ "$candidate" -nt "$newest" ]; }; then newest=$candidate; fi
    done
    if [ -n "$newest" ]; then echo "$PWD/$newest"; return; fi
    if command -v hybrid-sim >/dev/null; then command -v hybrid-sim; return; fi
    echo "relay-cluster: no hybrid-sim binary (swift build -c release, or set HYBRID_SIM)" >&2
    exit 1
}

# alive PID: the process runs (a zombie has exited; only its parent has not collected it yet).
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# children PID: the pids of PID's child processes (an nginx master's workers).
children() {
    local p stat ppid
    for p in /proc/[0-9]*; do
        { read -r stat <"$p/stat"; } 2>/dev/null || continue
        stat=${stat##*) }
        read -r _ ppid _ <<<"$stat"
        [ "$ppid" = "$1" ] && echo "${p#/proc/}"
    done
    return 0
}

# ours PIDFILE: prints the pid in PIDFILE if that process is still the one this script started
# (a relay: `hybrid-sim relay --port …` with its stdout in this directory; nginx: the master process
# started with this directory's config; nginx-log: the filter writing this directory's nginx-error.log).
# A pid file left by a cluster that died long ago may name a pid the system has since given to
# an unrelated process: that one is never signalled.
ours() {
    local pidfile=$1 pid cmdline name relay=' relay --port [0-9]+ --routing-id-prefix '
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile" 2>/dev/null) || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    cmdline=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 1
    name=$(basename "$pidfile" .pid)
    case "$name" in
        nginx) [[ "$cmdline" == *"nginx -c $dir/nginx.conf "* ]] || return 1 ;;
        nginx-log) [[ "$(readlink "/proc/$pid/fd/1" 2>/dev/null)" == "$dir/nginx-error.log" ]] || return 1 ;;
        relay-*)
            # A relay of this cluster: started with the script's arguments, its stdout in this directory.
            [[ "$cmdline" =~ $relay ]] || return 1
            [[ "$(readlink "/proc/$pid/fd/1" 2>/dev/null)" == "$dir/$name.out" ]] || return 1
            ;;
        *) return 1 ;;
    esac
    echo "$pid"
}

# nginx_master: the pid of this directory's nginx master, from its pid file or, if that is gone
# (removed by hand, or a stale one), by its process title.
nginx_master() {
    local p cmdline
    if ours "$dir/nginx.pid"; then return 0; fi
    for p in /proc/[0-9]*; do
        cmdline=$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
        if [[ "$cmdline" == "nginx: master process "*"nginx -c $dir/nginx.conf "* ]]; then
            echo "${p#/proc/}"
            return 0
        fi
    done
    return 1
}

# parent PID: PID's parent pid.
parent() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    read -r _ stat _ <<<"$stat"
    echo "$stat"
}

# strays: "KIND PID" for each running process of this directory's cluster found by the files it
# holds open rather than by a pid file: "nginx-worker" (an nginx process, by /proc/PID/exe, that is
# not a master and whose stderr is DIR/nginx-error.pipe: a worker of this cluster's nginx, whose
# master may be gone), "relay-I" (the script's relay arguments, stdout DIR/relay-I.out) and
# "nginx-log" (perl running nginx-log-filter.pl, stdout DIR/nginx-error.log). A file still counts once DIR was removed (" (deleted)").
# No other nginx or relay is ever named: none has its stderr or stdout in DIR.
strays() {
    local pattern entry path target pid fd cmdline exe relay=' relay --port [0-9]+ --routing-id-prefix '
    pattern=$(printf '%s' "$dir" | sed 's/[][*?\\]/\\&/g')
    while IFS=$'\t' read -r path target; do
        pid=${path#/proc/} fd=${pid#*/fd/} pid=${pid%%/*}
        target=${target% (deleted)}
        alive "$pid" || continue
        cmdline=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || continue
        if [ "$fd" = 2 ] && [ "$target" = "$dir/nginx-error.pipe" ]; then
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || exe=""
            exe=${exe% (deleted)}
            [ "${exe##*/}" = nginx ] || continue
            [[ "$cmdline" == "nginx: master process "* ]] && continue
            echo "nginx-worker $pid"
        elif [ "$fd" = 1 ] && [[ "$target" =~ ^"$dir"/relay-([0-9]+)\.out$ ]]; then
            local index=${BASH_REMATCH[1]}
            [[ "$cmdline" =~ $relay ]] && echo "relay-$index $pid"
        elif [ "$fd" = 1 ] && [ "$target" = "$dir/nginx-error.log" ] && [[ "$cmdline" == "perl "*"/nginx-log-filter.pl"* ]]; then
            echo "nginx-log $pid"
        fi
    done < <(find /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/2 -maxdepth 0 -lname "$pattern/*" -printf '%p\t%l\n' 2>/dev/null || true)
    return 0
}

# orphans: the pids of this directory's nginx workers whose master is gone (killed with SIGKILL, say):
# they keep serving the proxy's port.
orphans() {
    local kind pid master=""
    master=$(nginx_master) || master=""
    while read -r kind pid; do
        [ "$kind" = nginx-worker ] || continue
        [ -n "$master" ] && [ "$(parent "$pid")" = "$master" ] && continue
        echo "$pid"
    done < <(strays)
    return 0
}

# running: "NAME pid PID" for each process of this directory's cluster that runs.
running() {
    local pidfile pid kind seen=" "
    if pid=$(nginx_master); then echo "nginx pid $pid"; fi
    for pidfile in "$dir"/relay-*.pid; do
        if pid=$(ours "$pidfile"); then echo "$(basename "$pidfile" .pid) pid $pid"; seen+="$pid "; fi
    done
    for pid in $(orphans); do echo "orphaned nginx worker pid $pid"; done
    while read -r kind pid; do
        case "$kind" in relay-*) [[ "$seen" == *" $pid "* ]] || echo "$kind pid $pid (no pid file)" ;; esac
    done < <(strays)
    return 0
}

# wait_gone TENTHS PID…: waits up to TENTHS tenths of a second for every PID to end; fails if one runs.
# An ended process is given up to 5 s more to be reaped by its parent (init, once this
# script's relays are orphans), so that a caller checking with `kill -0` right after finds it gone.
wait_gone() {
    local tries=$1 pid any
    shift
    for _ in $(seq 1 "$tries"); do
        any=0
        for pid in "$@"; do if alive "$pid"; then any=1; fi; done
        if [ $any -eq 0 ]; then
            for _ in $(seq 1 50); do
                any=0
                for pid in "$@"; do if [ -e "/proc/$pid" ]; then any=1; fi; done
                [ $any -eq 0 ] && break
                sleep 0.1
            done
            return 0
        fi
        sleep 0.1
    done
    for pid in "$@"; do if alive "$pid"; then return 1; fi; done
}

# say_binary BIN: which relay binary runs, and when it was built (a stale build is the usual surprise).
say_binary() { echo "relay-cluster: relays run $1 (built $(date -r "$1" '+%Y-%m-%d %H:%M'))"; }

# joined ITEM…: the items separated by ", ".
joined() {
    local text="$1"
    shift
    for item in "$@"; do text+=", $item"; done
    echo "$text"
}
