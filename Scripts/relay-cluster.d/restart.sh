# Part of Scripts/relay-cluster, which sources it: `restart I`.
# Not run on its own: the entry point has checked the arguments and set `dir`, `command` and the
# options first.

# record I: sets `argv` to instance I's recorded command line (see start); fails if there is none.
record() {
    argv=()
    [ -f "$dir/relay-$1.cmd" ] || return 1
    mapfile -d '' -t argv <"$dir/relay-$1.cmd"
    [ ${#argv[@]} -ge 6 ] && [ "${argv[1]}" = relay ] && [ "${argv[2]}" = --port ] && [ "${argv[4]}" = --routing-id-prefix ]
}

restart() {
    local name="relay-$index" argv=() pid
    if ! record "$index"; then
        if compgen -G "$dir/relay-*.cmd" >/dev/null; then
            local last
            last=$(find "$dir" -maxdepth 1 -name 'relay-*.cmd' -printf '%f\n' | sed 's/relay-\(.*\)\.cmd/\1/' | sort -n | tail -1)
            usage_error "$dir has no instance $index (instances 0...$last)"
        fi
        echo "relay-cluster: no cluster recorded in $dir (instances are recorded by relay-cluster start)" >&2
        exit 1
    fi
    local bin=${argv[0]} rport=${argv[3]} prefix=${argv[5]}
    if ! nginx_master >/dev/null; then
        echo "relay-cluster: nginx is not running in $dir, so relay $index would be out of reach; run \`relay-cluster stop --dir $dir\` and start the cluster again" >&2
        exit 1
    fi
    [ -x "$bin" ] || { echo "relay-cluster: $bin, recorded at start, is not an executable file any more" >&2; exit 1; }
    if pid=$(ours "$dir/$name.pid"); then
        ended=() left=()
        watch_stderr "$name" "$pid"
        end TERM "$(relay_stop_seconds)" "$name" "$pid"
        if [ ${#left[@]} -gt 0 ]; then
            echo "relay-cluster: $name (pid $pid) is still running after SIGKILL; not restarted" >&2
            exit 1
        fi
        echo "relay-cluster: stopped $(joined "${ended[@]}"); its tunnels are gone"
        report_stopping "$name" || echo "relay-cluster: restarting it anyway" >&2
    fi
    rm -f "$dir/$name.pid"
    say_binary "$bin"
    local logged=0 printed=0
    if [ -f "$dir/$name.err" ]; then logged=$(stat -c %s "$dir/$name.err"); fi
    # The earlier run's stdout is kept (its `stopped` event and counters, with -- --json).
    if [ -f "$dir/$name.out" ]; then printed=$(stat -c %s "$dir/$name.out"); fi
    echo "relay-cluster: restarting relay $index at $(date '+%Y-%m-%d %H:%M:%S')" >>"$dir/$name.err"
    trap 'if pid=$(ours "$dir/$name.pid"); then kill -KILL "$pid" 2>/dev/null; fi; rm -f "$dir/$name.pid"; exit 130' INT TERM
    $detach "${argv[@]}" >>"$dir/$name.out" 2>>"$dir/$name.err" 9>&- &
    echo $! >"$dir/$name.pid"
    local url
    url=$(wait_ready "$index" "$printed")
    if [ -z "$url" ]; then
        echo "relay-cluster: relay $index did not start again on port $rport:" >&2
        tail -c +$((logged + 1)) "$dir/$name.err" | tail -n +2 >&2
        local low high
        if tail -c +$((logged + 1)) "$dir/$name.err" | grep -q "address already in use" \
            && (exec 3<>"/dev/tcp/127.0.0.1/$rport") 2>/dev/null; then
            echo "relay-cluster: another program listens on port $rport now; stop it, then restart relay $index" >&2
        elif tail -c +$((logged + 1)) "$dir/$name.err" | grep -q "address already in use" \
            && read -r low high </proc/sys/net/ipv4/ip_local_port_range && [ "$rport" -ge "$low" ] && [ "$rport" -le "$high" ]; then
            echo "relay-cluster: port $rport lies in the ephemeral range ($low-$high), where nginx's own connections to the relays take their source ports; start the cluster with --relay-ports BASE below $low so that a restart always gets its port back" >&2
        fi
        ended=() left=()
        if pid=$(ours "$dir/$name.pid"); then end TERM 10 "$name" "$pid"; fi
        [ ${#left[@]} -gt 0 ] || rm -f "$dir/$name.pid"
        exit 1
    fi
    trap - INT TERM
    echo "relay-cluster: relay $index (routing IDs $prefix….) restarted on $url, pid $(cat "$dir/$name.pid")"
}
