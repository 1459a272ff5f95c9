# Part of Scripts/relay-cluster, which sources it: `status`.
# Not run on its own: the entry point has checked the arguments and set `dir`, `command` and the
# options first.

# answers PORT: status 0 when the relay on 127.0.0.1:PORT answers an HTTP request within 2 s (any
# status: a 404 is an answer). A relay stopped by SIGSTOP, or stuck, still has its socket accepted by
# the kernel, so nginx's connect timeout never fires and its clients wait for their own timeouts.
answers() {
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET /cable/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" >&3 && head -c 5 <&3' \
        _ "$1" 2>/dev/null | grep -q '^HTTP/'
}

# Exit status: 0 all up and answering; 1 running, but a part is down, frozen, not answering, or
# DIR's filesystem is full; 2 not running (nothing of a cluster runs in DIR: none was started there,
# it was stopped, or it ended whole); 3 a start, stop or restart is in progress in DIR (it holds
# DIR/.lock): what runs so far is listed, without advice, since that command is changing it.
status() {
    local i pid argv=() where master found=0 proxy=0 orphaned=() down=0 runs=0 busy=""
    busy=$(lock_holder) || busy=""
    if ! [ -d "$dir" ]; then
        local running_now=()
        mapfile -t running_now < <(running)
        if [ ${#running_now[@]} -eq 0 ]; then
            echo "relay-cluster: not running ($dir missing)"
        else
            echo "relay-cluster: $dir is missing, but processes of its cluster still run: $(joined "${running_now[@]}"); \`relay-cluster stop --dir $dir\` ends them"
            return 1
        fi
        return 2
    fi
    if [ -n "$busy" ]; then
        echo "relay-cluster: $busy is in progress in $dir (it holds $dir/.lock): what runs so far is listed below; ask again once it has finished"
    fi
    if master=$(nginx_master); then proxy=1 runs=1; fi
    mapfile -t orphaned < <(orphans)
    [ ${#orphaned[@]} -eq 0 ] || runs=1
    for i in $(find "$dir" -maxdepth 1 \( -name 'relay-*.pid' -o -name 'relay-*.cmd' \) -printf '%f\n' \
            | sed -n 's/^relay-\([0-9]*\)\.\(pid\|cmd\)$/\1/p' | sort -nu); do
        found=1
        where=""
        if record "$i"; then where="prefix ${argv[5]}, port ${argv[3]}"; fi
        if pid=$(ours "$dir/relay-$i.pid"); then
            local health=""
            runs=1
            if [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" == [Tt] ]]; then
                health="; stopped (SIGSTOP or a debugger): its clients wait until their timeouts; \`kill -CONT $pid\` resumes it"
                down=1
            elif [ -n "$where" ] && ! answers "${argv[3]}"; then
                health="; does not answer HTTP within 2 s (stuck, or overloaded?): its clients wait until their timeouts"
                down=1
            fi
            echo "relay-$i: pid $pid, ${where:+$where, }$(ls /proc/"$pid"/fd 2>/dev/null | wc -l) open files$health"
        else
            local gone="" recorded
            if [ -f "$dir/relay-$i.pid" ]; then
                recorded=$(cat "$dir/relay-$i.pid")
                if alive "$recorded"; then
                    gone="pid $recorded is another program now, not this cluster's relay"
                else
                    gone="pid $recorded gone"
                fi
            fi
            down=1
            local hint=""
            [ $proxy -eq 1 ] && [ -n "$where" ] && [ -z "$busy" ] && hint="; \`relay-cluster restart $i --dir $dir\` starts it again"
            echo "relay-$i: not running (${gone}${gone:+${where:+; }}${where})${hint}"
        fi
    done
    if [ $proxy -eq 1 ]; then
        local worker count=0 most=0 files listen
        for worker in $(children "$master"); do
            count=$((count + 1))
            files=$(ls /proc/"$worker"/fd 2>/dev/null | wc -l)
            [ "$files" -gt "$most" ] && most=$files
        done
        # The proxy's addresses, from its configuration: ws://127.0.0.1:P[ … ws://127.0.0.K:P].
        listen=$(sed -n 's/^ *listen \([0-9.:]*\) .*/ws:\/\/\1/p' "$dir/nginx.conf" 2>/dev/null | sed -n '1p;$p' | uniq | paste -sd' ' - | sed 's/ / … /' || true)
        local plural=s
        [ "$count" -eq 1 ] && plural=
        echo "nginx: pid $master, $count worker$plural, ${listen:+proxy on $listen, }$(ls /proc/"$master"/fd 2>/dev/null | wc -l) open files (master), up to $most per worker"
        if ! ours "$dir/nginx-log.pid" >/dev/null; then
            echo "nginx-log: the filter of nginx's error log is not running: nginx's error lines are lost (stop and start the cluster)"
            down=1
        fi
    elif [ ${#orphaned[@]} -gt 0 ]; then
        down=1
        local plural=s
        [ ${#orphaned[@]} -eq 1 ] && plural=
        echo "nginx: master gone, ${#orphaned[@]} orphaned worker$plural still serving (pid$plural ${orphaned[*]}); \`relay-cluster stop --dir $dir\` ends them"
    elif [ $found -eq 1 ] || [ -f "$dir/nginx.pid" ] || [ -f "$dir/nginx.conf" ]; then
        local stale="" recorded
        # Not said during a start: its nginx has written its pid file before it names itself.
        if [ -f "$dir/nginx.pid" ] && [ -z "$busy" ]; then
            recorded=$(cat "$dir/nginx.pid" 2>/dev/null || true)
            if ! [[ "$recorded" =~ ^[0-9]+$ ]]; then
                stale=" ($dir/nginx.pid holds no pid: '$(head -c 40 "$dir/nginx.pid" 2>/dev/null | tr -d '\n')')"
            elif alive "$recorded"; then
                stale=" ($dir/nginx.pid names pid $recorded, which is another program now, not this cluster's nginx)"
            else
                stale=" ($dir/nginx.pid names pid $recorded, which is gone: nginx exited or was killed; see $dir/nginx-error.log)"
            fi
        fi
        if [ -n "$busy" ]; then echo "nginx: not running (yet, or no longer)"; else echo "nginx: not running: the proxy is down$stale"; fi
        down=1
    fi
    if ours "$dir/nginx-log.pid" >/dev/null; then runs=1; fi
    [ -z "$busy" ] || return 3
    if [ $found -eq 0 ] && [ $proxy -eq 0 ] && [ ${#orphaned[@]} -eq 0 ] && ! [ -f "$dir/nginx.conf" ]; then
        echo "relay-cluster: not running (no cluster in $dir)"
        return 2
    fi
    if space_problem; then down=1; fi
    # Nothing of it runs. Stopped (`stop` removes the pid file of everything that ended): exit 2.
    # Ended whole without a stop (killed, crashed, the machine restarted): its pid files remain,
    # and that is a cluster down (1), not one an operator stopped.
    if [ $runs -eq 0 ]; then
        local leftover
        leftover=$(cd "$dir" 2>/dev/null && ls nginx.pid nginx-log.pid relay-*.pid 2>/dev/null | paste -sd' ' - || true)
        if [ -n "$leftover" ]; then
            echo "relay-cluster: down: nothing of the cluster in $dir runs, but its pid files remain ($leftover): it ended without \`relay-cluster stop\` (killed, crashed, or the machine restarted); see $dir/relay-I.err and $dir/nginx-error.log, then \`relay-cluster stop --dir $dir\` and start it again"
            return 1
        fi
        echo "relay-cluster: not running: nothing of the cluster in $dir runs; \`relay-cluster start --dir $dir\` (with its options) starts it"
        return 2
    fi
    return $down
}
