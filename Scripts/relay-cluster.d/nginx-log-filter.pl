# Part of Scripts/relay-cluster: the filter between nginx's error log (its stderr, a pipe) and
# DIR/nginx-error.log, started by `start` (pid in DIR/nginx-log.pid); see the generated nginx.conf.
#
# It cuts every path segment under /cable/ longer than 8 characters to its first 4 (ABCD…; routing
# IDs, 6 hex digits, stay whole) and drops query strings: tunnel and contact IDs let whoever reads
# them join a tunnel or listen for a phone.
#
# And it keeps the log readable while an instance is down: nginx writes a line for every request
# it could not pass on (a phone homed on a dead instance reconnects about once a second, a line
# each time), so of the lines about a request with the same level, message and upstream (the
# request itself, client and connection number aside), the first is written and the others for
# the next 60 s are counted: the first one after that window is written again, after a line
# `relay-cluster: N more lines like the one at TIME (MESSAGE, upstream U) not logged`, and the
# counts left at the end (nginx stopped) are written then. Lines not about a request (nginx
# starting, a worker exiting) are all written.
#
# Each line is written at once ($|). Perl's reads return the lines there are (sed -u read a byte at
# a time, 7 times slower: a burst of errors would fill the pipe and stall nginx's workers).
use strict;
$| = 1;
my $window = 60;
my (%since, %held);

sub stamp {
    my @t = localtime($_[0]);
    return sprintf("%04d/%02d/%02d %02d:%02d:%02d", $t[5] + 1900, $t[4] + 1, @t[3, 2, 1, 0]);
}

sub redact {
    my $line = shift;
    1 while $line =~ s{(/cable/(?:[^ "/?]*/)*[^ "/?]{4})[^ "/?]{5,}}{$1\xe2\x80\xa6}i;
    $line =~ s{(/cable/[^ "?]*)\?[^ "]*}{$1?\xe2\x80\xa6}gi;
    return $line;
}

# summary KEY NOW: the line counting what was held back of KEY's kind ("" when nothing was).
sub summary {
    my ($key, $now) = @_;
    my $count = delete $held{$key} or return "";
    my ($what, $upstream) = split /\t/, $key, 2;
    return redact(sprintf("%s [notice] relay-cluster: %d more line%s like the one at %s (%s%s) not logged\n",
        stamp($now), $count, $count == 1 ? "" : "s", stamp($since{$key}), $what, $upstream eq "" ? "" : ", upstream $upstream"));
}

# Ended by a signal (`stop` sends SIGTERM to a filter that outlives nginx): the counts held back
# are written first, as at the end of its input.
for my $signal (qw(TERM INT HUP)) {
    $SIG{$signal} = sub { print summary($_, time) for sort keys %held; exit 0; };
}

while (my $line = <STDIN>) {
    my $now = time;
    # "2026/11/28 08:40:44 [error] 14551#14551: *7 connect() failed (…) while connecting to upstream,
    # client: 127.0.0.1, server: , request: "GET /cable/…", upstream: "http://127.0.0.1:45029/…", …"
    if ($line =~ m{^\S+ \S+ \[(\w+)\] \d+#\d+: \*\d+ (.*?), client: }) {
        my $key = "[$1] $2\t" . ($line =~ m{, upstream: "(\w+://[^/"]+)} ? $1 : "");
        if (exists $since{$key} && $now - $since{$key} < $window) {
            $held{$key}++;
            next;
        }
        print summary($key, $now);
        # Bounded: kinds are few (message × upstream), but not trusted to be.
        if (keys %since > 10000) {
            print summary($_, $now) for sort keys %held;
            %since = ();
        }
        $since{$key} = $now;
    }
    print redact($line);
}
print summary($_, time) for sort keys %held;
