#!/usr/bin/perl
# A delaying TCP proxy: the fallback for region latency where the kernel has no netem.
#
#   wan-proxy.pl LISTEN_PORT=DEST_IP:DEST_PORT:RTT_MS ...
#
# Listens on 127.0.0.1:LISTEN_PORT (wan.sh redirects the node's connections there) and
# forwards each connection to DEST_IP:DEST_PORT, holding every chunk for half of RTT_MS in
# each direction, so a request and its answer take one RTT more than on the bridge. One
# process per connection (fork): a slow or dead destination holds up only its own.
use strict;
use warnings;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time);

$SIG{CHLD} = 'IGNORE';
$| = 1;

my %routes;
my $listening = IO::Select->new;
for my $spec (@ARGV) {
    my ($port, $host, $dport, $rtt) = $spec =~ /^(\d+)=([\d.]+):(\d+):(\d+(?:\.\d+)?)$/
        or die "wan-proxy: bad route $spec (LISTEN_PORT=DEST_IP:DEST_PORT:RTT_MS)\n";
    my $listener = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 128, ReuseAddr => 1)
        or die "wan-proxy: cannot listen on $port: $!\n";
    $routes{fileno $listener} = [$host, $dport, $rtt / 2000];
    $listening->add($listener);
}
print STDERR "wan-proxy: ", scalar(@ARGV), " routes\n";

while (1) {
    for my $listener ($listening->can_read) {
        my $client = $listener->accept or next;
        my $pid = fork;
        if (defined $pid && $pid == 0) {
            pump($client, @{ $routes{fileno $listener} });
            POSIX::_exit(0);
        }
        close $client;
    }
}

# Copies both directions of one connection, each chunk released `delay` seconds after it
# was read; an end of stream travels the same way (a half close) after the data before it.
sub pump {
    my ($client, $host, $port, $delay) = @_;
    my $server = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Timeout => 5)
        or return;
    my @to = ($server, $client);    # direction 0: client -> server, 1: server -> client
    my @queue = ([], []);
    my @closed = (0, 0);
    my $reading = IO::Select->new($client, $server);
    while (!($closed[0] && $closed[1])) {
        my $next;
        for my $d (0, 1) {
            next unless @{ $queue[$d] };
            my $due = $queue[$d][0][0];
            $next = $due if !defined $next || $due < $next;
        }
        my $wait = defined $next ? ($next > time ? $next - time : 0) : undef;
        my @ready = $reading->count ? $reading->can_read($wait) : ();
        select(undef, undef, undef, $wait) if !$reading->count && defined $wait;
        for my $socket (@ready) {
            my $d = $socket == $client ? 0 : 1;
            my $n = sysread($socket, my $chunk, 65536);
            push @{ $queue[$d] }, [time + $delay, $n ? $chunk : undef];
            $reading->remove($socket) unless $n;
        }
        my $now = time;
        for my $d (0, 1) {
            while (@{ $queue[$d] } && $queue[$d][0][0] <= $now) {
                my (undef, $chunk) = @{ shift @{ $queue[$d] } };
                if (!defined $chunk) {
                    shutdown($to[$d], 1);
                    $closed[$d] = 1;
                    next;
                }
                my $off = 0;
                while ($off < length $chunk) {
                    my $written = syswrite($to[$d], $chunk, length($chunk) - $off, $off);
                    return unless $written;    # the other side is gone
                    $off += $written;
                }
            }
        }
    }
}
