# A waiting session sleeps until replay wakes it: every form of gate, as the
# first statement of its transaction, wakes at most 20 times a second while
# replay stands still (a token's wait re-checks its timeline every 100 ms),
# and returns within RG_WAKE_BOUND_MS of replay passing its target (a
# spinning probe session notes when).  Wake-ups are counted
# from the scheduler (/proc/PID/schedstat: how often the backend ran).  A
# session-mode statement that polled every 2 ms for lock conflicts woke
# about 400 times a second.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(primary_conf => "autovacuum = off\n");
$primary->safe_psql('postgres', 'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

rg_pause_replay($standby);
my $token = $primary->safe_psql('postgres',
	'UPDATE counter SET v = 1; SELECT replica_gate.last_commit_token()');
# Each form notes the time as it returns from its gate, in the statement
# that gated (the function: the statement right after it), then reads the
# value: noted after one more statement, psql's round trips on a loaded
# machine came to 8 ms more than the bound once.
my $at = "SELECT 'at', extract(epoch FROM clock_timestamp()) FROM counter";
my %forms = (
	function => [ "SELECT replica_gate.require_lsn('$token', 60000)", $at ],
	set => [ "SET replica_gate.default_timeout = 60000; SET replica_gate.require_lsn = '$token'",
		$at ],
	session_mode => [ 'SET replica_gate.default_timeout = 60000',
		'SET replica_gate.consistency = strong', $at ],
	read_after => [ 'SET replica_gate.default_timeout = 60000',
		"SET replica_gate.read_after = '$token'", $at ]);
my (%h, %pid);
for my $form (sort keys %forms)
{
	$h{$form} = rg_bg_start($standby, [ @{ $forms{$form} }, 'SELECT v FROM counter' ],
		"asleep_$form");
	$pid{$form} = rg_pid_of($standby, "asleep_$form");
}

# how many times a backend has run so far (the second field of schedstat
# is time, the third the number of times it was scheduled in)
my $runs = sub {
	open(my $f, '<', "/proc/$_[0]/schedstat") or die "schedstat: $!";
	my @fields = split ' ', <$f>;
	close $f;
	return $fields[2];
};
sleep 1;    # past the first look at replay
my %before = map { ($_ => $runs->($pid{$_})) } keys %pid;
sleep 3;
for my $form (sort keys %pid)
{
	my $per_s = ($runs->($pid{$form}) - $before{$form}) / 3;
	cmp_ok($per_s, '<=', 20, "$form: a waiting session wakes at most 20 times a second ($per_s)");
}

my $probe = rg_probe_start($standby, $token, 'probe');
sleep 1;
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
my $passed = rg_probe_time($probe);
for my $form (sort keys %h)
{
	rg_bg_finish($h{$form});
	my ($at) = $h{$form}{stdout} =~ /^at\|([0-9.]+)$/m;
	my ($v) = $h{$form}{stdout} =~ /(?:^|\n)(\d+)$/;
	is($v, 1, "$form: then sees the write") or diag($h{$form}{stderr});
	my $late = ($at // 0) * 1000 - $passed * 1000;
	cmp_ok($late, '<=', RG_WAKE_BOUND_MS,
		"$form: and returns within @{[RG_WAKE_BOUND_MS]} ms of replay passing its target ($late ms)");
}
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');
done_testing();
