# A wait on a far LSN, which any role can start, must not make the replay
# watcher look at replay every poll_interval while replay runs: it looks
# about every 10 ms until a target is near (src/worker.c,
# rg_worker_poll_ms).  A nearer waiter that arrives meanwhile is still woken
# as soon as replay reaches it.  PostgreSQL 13 to 18 (19 has no watcher:
# core wakes its waiters).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

plan skip_all => 'no /proc/PID/schedstat' unless -r "/proc/$$/schedstat";

my ($primary, $standby) = rg_primary_standby();
plan skip_all => 'PostgreSQL 19+ has no replay watcher' if rg_core_wait($standby);

$primary->safe_psql('postgres', 'CREATE TABLE t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');

# The primary commits one row at a time for $seconds, so that replay on the
# standby moves all the time.
sub start_writer
{
	my ($seconds) = @_;
	return rg_bg_start($primary,
		"DO \$\$ DECLARE stop timestamptz := clock_timestamp() + interval '$seconds s';
		 BEGIN WHILE clock_timestamp() < stop LOOP
		 INSERT INTO t VALUES (1); COMMIT; END LOOP; END \$\$",
		'writer');
}

# 100 GB past the primary's WAL: far, and (unlike FFFFFFFF/FFFFFFFF, the
# registry's "nobody waits" bound) a bound of its own.
my $far_lsn = rg_next_lsn($primary, 100 * 2**30);
my $far = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$far_lsn', 60000)", 'far');
rg_pid_of($standby, 'far');

# Replay moves throughout: the far waiter keeps the watcher polling, but
# every 10 ms, not every 0.5 ms (about 2,000 runs a second).
my $writer = start_writer(4);
sleep 1;
my $before = $standby->safe_psql('postgres', 'SELECT pg_last_wal_replay_lsn()');
my $runs = rg_watcher_runs($standby, 1);
my $moved = $standby->safe_psql('postgres',
	"SELECT pg_last_wal_replay_lsn() - '$before'::pg_lsn");
cmp_ok($moved, '>', 100000, "replay moved during the second measured ($moved bytes)");
cmp_ok($runs, '<', 400,
	"a far target keeps the watcher to about 100 looks a second ($runs runs in 1 s)");

# A near waiter, while the far one still waits and replay runs: woken by
# replay, not by its timeout.  One more commit past its target: on a
# loaded machine the writer's 4 s may be over by then.
my $target = rg_next_lsn($primary);
my $near = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$target', 10000)", 'near');
$primary->safe_psql('postgres', 'INSERT INTO t VALUES (2)');
rg_bg_finish($near);
is($near->{stdout}, 't', 'a near waiter is woken while a far one waits');
rg_bg_finish($writer);

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'1', 'the far waiter still waits');
$standby->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'far'");
rg_bg_finish($far);

$standby->stop;
$primary->stop;
done_testing();
