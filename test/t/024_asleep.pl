# A waiting session sleeps until replay wakes it: every form of gate, as the
# first statement of its transaction, wakes at most 20 times a second while
# replay stands still (a token's wait re-checks its timeline every 100 ms),
# and returns within RG_WAKE_BOUND_MS of replay passing its target (a
# spinning probe session notes when), besides the time that it and the
# processes that wake it waited for a CPU meanwhile.  Both are read from
# the scheduler (/proc/PID/schedstat: how often a process ran, how long it
# waited to run).  A session-mode statement that polled every 2 ms for
# lock conflicts woke about 400 times a second; a lost wake-up returns at
# the next re-check, up to 100 ms late, asleep: no wait for a CPU.

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
# The processes between replay passing a target and its waiter's wake-up:
# the startup process, which on 16 to 19 signals it, and on 13 to 18 the
# replay watcher.
my @wakers = split /\n/, $standby->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type IN ('startup', 'replica_gate replay watcher')");
# Each form notes the time as it returns from its gate, and how long it and
# the wakers have waited for a CPU so far, in the statement that gated or
# the next one of the same query string, then reads the value: noted after
# a round trip, psql's on a loaded machine came to 8 ms more than the bound
# once.
my $at = "SELECT 'at', extract(epoch FROM clock_timestamp()), "
  . rg_queued_ns('pg_backend_pid()', @wakers) . ' FROM counter';
my %forms = (
	function => [ "SELECT replica_gate.require_lsn('$token', 60000); $at" ],
	set => [ "SET replica_gate.default_timeout = 60000; SET replica_gate.require_lsn = '$token'; $at" ],
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

sleep 1;    # past the first look at replay
my %before = map { ($_ => (rg_schedstat($pid{$_}))[2]) } keys %pid;
sleep 3;
for my $form (sort keys %pid)
{
	my $per_s = ((rg_schedstat($pid{$form}))[2] - $before{$form}) / 3;
	cmp_ok($per_s, '<=', 20, "$form: a waiting session wakes at most 20 times a second ($per_s)");
}

# What a machine's load adds to a return: the time the waiter, and the
# wakers after replay passed its target, waited for a CPU (on a loaded
# machine returns came up to 72 ms late).  A waiter asleep waits for none:
# its own count starts before replay resumes, the wakers' as the probe
# sees replay pass.
my $probe = rg_probe_start($standby, $token, 'probe', @wakers);
sleep 1;
my %queued = map { ($_ => (rg_schedstat($pid{$_}))[1]) } keys %pid;
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
my ($passed, @wakers_queued) = rg_probe_time($probe);
for my $form (sort keys %h)
{
	rg_bg_finish($h{$form});
	my ($noted) = $h{$form}{stdout} =~ /^at\|(.*)$/m;
	my ($v) = $h{$form}{stdout} =~ /(?:^|\n)(\d+)$/;
	is($v, 1, "$form: then sees the write") or diag($h{$form}{stderr});
	my ($late, $queued) = rg_wake_lag($noted, $passed, $queued{$form}, @wakers_queued);
	cmp_ok($late, '<=', RG_WAKE_BOUND_MS,
		"$form: and returns within @{[RG_WAKE_BOUND_MS]} ms of replay passing its target, "
		  . "besides $queued ms that it and its wakers waited for a CPU ($late ms)");
}
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');
done_testing();
