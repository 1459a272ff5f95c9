# Part of Scripts/relay-cluster, which sources it: `start`, with the nginx.conf it writes.
# Not run on its own: the entry point has checked the arguments and set `dir`, `command` and the
# options first.

# The relays run in a session of their own (setsid: in a script it execs the relay in place, so $! is
# the relay's pid), out of the terminal's reach: a Ctrl-C during `start` used to reach them too
# (they shut down on SIGINT) while `start` could still go on to print "ready"; now it reaches this
# script only, which stops them itself. nginx puts itself in its own session.
detach=""
if command -v setsid >/dev/null; then detach=setsid; fi

# interrupted NAME STATUS: the INT/TERM/HUP trap of `start`: stops what it had started, says so and
# exits STATUS (128 + the signal's number). Further signals are ignored until it is done.
interrupted() {
    trap '' INT TERM HUP
    trap - ERR
    if stop >/dev/null 2>&1; then
        echo "relay-cluster: start interrupted by SIG$1; stopped what it had started" >&2
    else
        echo "relay-cluster: start interrupted by SIG$1; some of what it had started still runs (relay-cluster status --dir $dir)" >&2
    fi
    exit "$2"
}

# listening ADDRESS PORT: something listens on ADDRESS:PORT (TCP).
listening() {
    if command -v ss >/dev/null; then
        ss -Hltn "sport = :$2" 2>/dev/null | awk -v want="$1:$2" '$4 == want { found = 1 } END { exit !found }'
    else
        (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
    fi
}

# wait_ready I [FROM]: the ws:// URL relay I printed on stdout once listening (after byte FROM of
# relay-I.out, where an earlier run's output ends), or nothing if it exited or printed none within 10 s.
wait_ready() {
    local url="" from=${2:-0}
    for _ in $(seq 1 100); do
        url=$(tail -c +$((from + 1)) "$dir/relay-$1.out" 2>/dev/null | grep -o 'ws://[^ "]*' | head -1 || true)
        [ -n "$url" ] && break
        alive "$(cat "$dir/relay-$1.pid")" || break  # it exited (a bad flag, a taken port): no need to wait
        sleep 0.1
    done
    echo "$url"
}

start() {
    command -v nginx >/dev/null || { echo "relay-cluster: nginx is not installed (apt-get install nginx)" >&2; exit 1; }
    command -v perl >/dev/null || { echo "relay-cluster: perl, which filters nginx's log, is not installed (apt-get install perl-base)" >&2; exit 1; }
    local bin
    bin=$(binary)
    # A binary older than this script lacks flags it passes: said at once, not as a relay that
    # did not start with "Unknown option".
    local help
    if ! help=$(timeout 10 "$bin" relay --help 2>&1); then
        echo "relay-cluster: $bin relay --help failed (is it a hybrid-sim binary for this machine?): $(printf '%s' "$help" | head -c 300)" >&2
        exit 1
    fi
    if ! grep -q -- '--contacts' <<<"$help"; then
        echo "relay-cluster: $bin is older than this script (its relay has no --contacts): build it again (swift build -c release --product hybrid-sim) or set HYBRID_SIM" >&2
        exit 1
    fi
    local others=()
    mapfile -t others < <(running)
    if [ ${#others[@]} -gt 0 ]; then
        echo "relay-cluster: a cluster is already running in $dir ($(joined "${others[@]}")); run \`relay-cluster stop --dir $dir\` first (restarting it would drop its tunnels)" >&2
        exit 3
    fi
    local listens="" a
    for a in $(seq 1 "$addresses"); do
        listens+="        listen 127.0.0.$a:$port reuseport backlog=4096;"$'\n'
        # nginx listens with reuseport, so its own bind would succeed next to another cluster's
        # proxy and share the port with it: look for a listener first.
        if (exec 3<>"/dev/tcp/127.0.0.$a/$port") 2>/dev/null; then
            echo "relay-cluster: something already listens on 127.0.0.$a:$port (another cluster?); pick another --port or stop it" >&2
            exit 1
        fi
    done
    say_binary "$bin"
    # What a cluster that ended without `stop` left behind (nothing of it runs, checked above).
    mkdir -p "$dir/temp"
    rm -f "$dir"/relay-*.pid "$dir"/relay-*.cmd "$dir/nginx.pid" "$dir/nginx-log.pid" "$dir/nginx-error.pipe"
    # One run's nginx log at a time (it grew across runs): the previous one is kept as .1.
    if [ -f "$dir/nginx-error.log" ]; then mv -f "$dir/nginx-error.log" "$dir/nginx-error.log.1"; fi
    # From the first relay on, any way out before the cluster is up (a failed command under
    # `set -e`, Ctrl-C, a kill) stops what was started. The ERR trap covers start's own commands
    # only: there is no `set -E`, under which it would also run in each function and command
    # substitution, where a failing command is often expected (wait_ready polls a log that is not
    # written yet) and would stop the cluster being started. So every command here that can fail
    # is in start's body, not in a helper.
    trap 'stop >/dev/null 2>&1; exit 1' ERR
    trap 'interrupted INT 130' INT
    trap 'interrupted TERM 143' TERM
    trap 'interrupted HUP 129' HUP
    local upstreams="" routes="" spread="" hashed="" i addresses_of=()
    local common=(--log-level warning --max-tunnels 9900 --max-connections 19900)
    for i in $(seq 0 $((instances - 1))); do
        local prefix url address
        prefix=$(printf '%02X' "$i")
        local rport=0
        [ "$relay_ports" -eq 0 ] || rport=$((relay_ports + i))
        $detach "$bin" relay --port "$rport" --routing-id-prefix "$prefix" --contacts "$dir/contacts-$i.json" "${common[@]}" \
            ${relay_args[@]+"${relay_args[@]}"} \
            >"$dir/relay-$i.out" 2>"$dir/relay-$i.err" 9>&- &
        echo $! >"$dir/relay-$i.pid"
        url=$(wait_ready "$i")
        if [ -z "$url" ]; then
            echo "relay-cluster: relay $i did not start:" >&2
            cat "$dir/relay-$i.err" >&2
            # A relay flag (after --) the relay refused is a usage error, as the script's own are:
            # the first relay says so (64) before any other part of the cluster starts.
            local code=1 pid
            pid=$(cat "$dir/relay-$i.pid")
            if ! alive "$pid"; then wait "$pid" 2>/dev/null || code=$?; fi
            stop >/dev/null
            [ "$code" -ne 64 ] || exit 64
            exit 1
        fi
        address=${url#ws://}
        # For `restart`: the same command on the port it got, so nginx's upstream stays right.
        printf '%s\0' "$bin" relay --port "${address##*:}" --routing-id-prefix "$prefix" --contacts "$dir/contacts-$i.json" "${common[@]}" \
            ${relay_args[@]+"${relay_args[@]}"} >"$dir/relay-$i.cmd"
        upstreams+="    upstream relay_$prefix { server $address; }"$'\n'
        routes+="        ~*^/cable/connect/$prefix relay_$prefix;"$'\n'
        spread+="        server $address max_fails=0;"$'\n'
        hashed+="        server $address max_fails=0;"$'\n'
        addresses_of+=("$address")
        echo "relay-cluster: relay $i (routing IDs $prefix….) on $url, pid $(cat "$dir/relay-$i.pid")"
    done
    cat >"$dir/nginx.conf" <<EOF
# Generated by Scripts/relay-cluster: $instances hybrid-sim relay instances behind one nginx.
worker_processes $workers;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
# What is logged, and why not more: an error log line about a request names it (request: "GET
# /cable/new/{tunnel ID} …", upstream: "http://…/cable/connect/{routing ID}/{tunnel ID}", the
# contact ID of /cable/listen and /cable/contact), and those IDs let whoever reads them join the
# tunnel or listen for the phone, so, as in the relay's own log, they are never written in full.
# nginx offers no way to leave the request out of a line, so it logs to stderr, a pipe to a filter
# started by relay-cluster (Scripts/relay-cluster.d/nginx-log-filter.pl, pid in nginx-log.pid) that
# cuts every path segment under /cable/ longer than 8 characters to its first 4 (ABCD…; routing
# IDs, 6 hex digits, stay whole) and drops query strings before appending the line to
# nginx-error.log. Logged: nginx's warnings and errors (an upstream refusing or resetting
# connections, timeouts, worker_connections running out, workers exiting) with the client address
# and the cut request. Not logged: requests (no access log). An instance that is down makes a line
# for every request sent to it (the contact routes do not go on to another instance, and a phone
# homed there reconnects about once a second): the level stays warn, which the first such line
# needs, and the filter writes the first line of each kind (message and upstream) and counts the
# rest for a minute ("N more lines like the one at …, not logged").
error_log stderr warn;
# A graceful stop (SIGQUIT; relay-cluster stops the relays first, which close their tunnels) waits
# for open connections at most this long.
worker_shutdown_timeout 10s;
events {
    worker_connections 19000;
    multi_accept on;
}
http {
    access_log off;
    client_body_temp_path $dir/temp/body;
    proxy_temp_path $dir/temp/proxy;
    fastcgi_temp_path $dir/temp/fastcgi;
    uwsgi_temp_path $dir/temp/uwsgi;
    scgi_temp_path $dir/temp/scgi;
$upstreams
    # /cable/new (and whatever is not routed below: the instance answers 404/400): any instance. The
    # zone makes the workers share one round-robin position (without it every worker started on the
    # first instance). A request that an instance refuses (down, restarting: connection refused, or
    # a connect past 2 s) or answers 503 (full: it created nothing) goes on to the next instance;
    # 502 only when every instance failed it. max_fails=0: nginx never marks an instance down. With
    # max_fails=1 fail_timeout=1s a full or restarted instance was let back only after a probe
    # request finished, and a probe through here is a tunnel that lasts minutes: every /cable/new
    # got 502 "no live upstreams" long after the instances had room again. The zone takes under
    # 1 KiB per server: 64 KiB and 1 KiB per instance (256 servers do not fit in 192 KiB).
    upstream relay_new {
        zone relay_new $((64 + instances))k;
$spread    }
    # Linked phones: /cable/listen/{contact ID} and /cable/contact/{contact ID} must meet on one
    # instance, and always the same one: a contact ID lives on its hashed instance. max_fails=0 keeps
    # the hash from moving a contact ID to the next instance while its own is down (the phone would
    # listen there, and after the restart its desktops' contacts would reach an instance that never
    # saw it: 410, and the desktop drops the link); while it is down, both get 502 (a desktop keeps its
    # link on a 502, and the phone's next reconnect after the restart lands on it again).
    map \$uri \$cable_contact {
        ~^/cable/(?:listen|contact)/(?<contact>[^/]+)\$ \$contact;
        default "";
    }
    # Plain hash, not consistent: it picks by position in this list (instance order), so a contact
    # ID reaches the same instance after a stop and start, whose relays get new ports (a
    # consistent hash rings on HOST:PORT and moved most IDs away from the instance, and its
    # contacts file, that knew them). Another --instances count moves them.
    upstream relay_contact {
        hash \$cable_contact;
$hashed    }
    # /cable/connect/{routing ID}/… goes to the instance whose prefix starts the routing ID; the rest
    # (unknown prefixes, other paths) to relay_new.
    map \$uri \$cable_upstream {
$routes        default relay_new;
    }
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        '' close;
    }
    server {
$listens        proxy_http_version 1.1;
        proxy_set_header Upgrade \$http_upgrade;
        proxy_set_header Connection \$connection_upgrade;
        proxy_set_header Host \$http_host;
        proxy_buffering off;
        proxy_read_timeout 1h;
        proxy_send_timeout 1h;
        location ^~ /cable/new/ {
            proxy_pass http://relay_new;
            proxy_next_upstream error timeout http_503;
            proxy_connect_timeout 2s;
        }
        location ~ ^/cable/(?:listen|contact)/ {
            proxy_pass http://relay_contact;
            proxy_next_upstream off;
        }
        location /cable/ {
            proxy_pass http://\$cable_upstream;
        }
    }
}
EOF
    if ! nginx -t -q -c "$dir/nginx.conf" -p "$dir" 2>"$dir/nginx-test.err" 9>&-; then
        echo "relay-cluster: nginx rejected its configuration:" >&2
        cat "$dir/nginx-test.err" >&2
        stop >/dev/null
        exit 1
    fi
    # nginx's stderr (its error log) goes through the filter described in nginx.conf. The filter
    # opens the pipe after its output, so that `ours` knows it even while it waits for nginx.
    local logged=0
    if [ -f "$dir/nginx-error.log" ]; then logged=$(stat -c %s "$dir/nginx-error.log"); fi
    mkfifo "$dir/nginx-error.pipe"
    # Opened read-write here first (which never blocks on Linux): should the filter fail to start
    # (its log not writable), nginx's open of the pipe then does not wait for a reader forever.
    exec 3<>"$dir/nginx-error.pipe"
    # The filter (nginx-log-filter.pl: it writes each line at once, and one line a minute of each
    # kind of request error) opens the pipe read-only (not a copy of descriptor 3, which can write: holding a
    # writer itself, it would never see the end of its input, and `stop` waited for it); the open
    # does not block, descriptor 3 being a writer.
    LC_ALL=C perl "$(dirname "$self")/relay-cluster.d/nginx-log-filter.pl" >>"$dir/nginx-error.log" 2>&1 <"$dir/nginx-error.pipe" 3<&- 9>&- &
    echo $! >"$dir/nginx-log.pid"
    if wait_gone 2 "$(cat "$dir/nginx-log.pid")"; then
        exec 3>&-
        echo "relay-cluster: the nginx log filter did not start (can $dir/nginx-error.log be written?)" >&2
        stop >/dev/null
        exit 1
    fi
    # `set -e` must not end the script here: the relays started above would be left running.
    if ! nginx -c "$dir/nginx.conf" -p "$dir" 2>"$dir/nginx-error.pipe" 3>&- 9>&-; then
        exec 3>&-
        wait_gone 20 "$(cat "$dir/nginx-log.pid")" || true  # its input ended with nginx: all is written
        echo "relay-cluster: nginx did not start:" >&2
        tail -c +$((logged + 1)) "$dir/nginx-error.log" | awk '!seen[$0]++' >&2
        if tail -c +$((logged + 1)) "$dir/nginx-error.log" | grep -q "Address already in use"; then
            local where="127.0.0.1"
            [ "$addresses" -gt 1 ] && where="127.0.0.1…127.0.0.$addresses"
            echo "relay-cluster: port $port is taken on $where; pick another with --port" >&2
        fi
        stop >/dev/null
        exit 1
    fi
    for _ in $(seq 1 50); do [ -s "$dir/nginx.pid" ] && break; sleep 0.1; done
    # The filter's input now ends with nginx's last descriptor of the pipe, not with this script's.
    exec 3>&-
    [ -s "$dir/nginx.pid" ] || { echo "relay-cluster: nginx did not start (see $dir/nginx-error.log)" >&2; stop >/dev/null; exit 1; }
    # Before "ready": every relay still runs and listens on its port, and so does nginx on the proxy's
    # (a relay can die after its ready line: a kill, a crash).
    local dead=""
    for i in $(seq 0 $((instances - 1))); do
        local pid
        pid=$(cat "$dir/relay-$i.pid")
        if ! alive "$pid"; then
            dead="relay $i (pid $pid) exited before the cluster was ready (see $dir/relay-$i.err)"
        elif ! listening "${addresses_of[$i]%:*}" "${addresses_of[$i]##*:}"; then
            dead="relay $i (pid $pid) no longer listens on ${addresses_of[$i]} (see $dir/relay-$i.err)"
        fi
        [ -z "$dead" ] || break
    done
    if [ -z "$dead" ]; then
        if ! ours "$dir/nginx.pid" >/dev/null; then
            dead="nginx (pid $(cat "$dir/nginx.pid")) exited before the cluster was ready (see $dir/nginx-error.log)"
        elif ! listening 127.0.0.1 "$port"; then
            dead="nginx does not listen on 127.0.0.1:$port (see $dir/nginx-error.log)"
        fi
    fi
    if [ -n "$dead" ]; then
        trap '' INT TERM HUP
        echo "relay-cluster: $dead; stopped the rest" >&2
        stop >/dev/null 2>&1 || true
        exit 1
    fi
    # Done: a signal from here on no longer undoes the start.
    trap - ERR
    trap '' INT TERM HUP
    local plural=s
    [ "$workers" -eq 1 ] && plural=
    echo "relay-cluster: nginx (pid $(cat "$dir/nginx.pid"), $workers worker$plural) routing by routing ID"
    echo "relay-cluster: ready on ws://127.0.0.1:$port"
    case "$addresses" in
        1) ;;
        2) echo "relay-cluster: also on ws://127.0.0.2:$port (the same proxy)" ;;
        3) echo "relay-cluster: also on ws://127.0.0.2:$port and ws://127.0.0.3:$port (the same proxy)" ;;
        *) echo "relay-cluster: also on ws://127.0.0.2:$port … ws://127.0.0.$addresses:$port, $((addresses - 1)) addresses (the same proxy)" ;;
    esac
    return 0
}
