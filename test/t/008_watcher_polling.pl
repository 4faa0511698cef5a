# Where the replay watcher has to poll (PostgreSQL 13 to 15), it sleeps
# while a walreceiver streams and all it wrote is replayed, still wakes
# waiters within milliseconds when new WAL arrives, and polls in every other
# state: received WAL not replayed yet, no walreceiver (archive recovery),
# a promotion under way -- less often while the target is far.  The
# watcher's run count, from /proc/PID/schedstat, tells polling (about 2,000
# runs a second; 100 for a far target) from sleep.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

plan skip_all => 'WAL arrival notices need Linux' if $^O ne 'linux';
plan skip_all => 'no /proc/PID/schedstat' unless -r "/proc/$$/schedstat";

my ($primary, $standby) = rg_primary_standby();
plan skip_all => 'PostgreSQL 16+ wakes the watcher on the replay condition variable'
  if rg_major($standby) >= 16;

$primary->safe_psql('postgres', 'CREATE TABLE t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');

# Nothing to replay: the watcher sleeps although someone waits, and new WAL
# still ends the wait at once.  The target lies 1 MB past the primary's WAL,
# so that only the test's own write (about 1.6 MB of WAL) reaches it, not
# the few bytes an idle primary writes now and then; and the quiet state is
# judged by the quietest of three 1 s windows, so that such a background
# record, which makes the watcher poll for 100 ms, cannot decide it.
for my $round (1 .. 3)
{
	my ($hi, $lo) = split m{/}, rg_next_lsn($primary);
	my $far = hex($hi) * 2**32 + hex($lo) + 2**20;
	my $target = sprintf('%X/%X', int($far / 2**32), $far % 2**32);
	my $h = rg_bg_start($standby,
		rg_woke_at("replica_gate.wait_for_lsn('$target', 60000)"),
		"quiet$round");
	my $pid = rg_pid_of($standby, "quiet$round");
	sleep 1;
	my $quietest = (sort { $a <=> $b } map { rg_watcher_runs($standby, 1) } 1 .. 3)[0];
	cmp_ok($quietest, '<', 20,
		"round $round: the watcher sleeps while no WAL is pending ($quietest runs in the quietest second)");
	is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
		'1', "round $round: the waiter still waits before the write");

	# the moment replay passes the target, from a session that spins for it:
	# the 1.6 MB write's own time to the standby and through replay, which a
	# loaded machine stretches, is not the watcher's
	my $probe = rg_probe_start($standby, $target, "probe$round");
	my $queued = (rg_schedstat($pid))[1];
	my $written = $primary->safe_psql('postgres',
		'SELECT extract(epoch FROM clock_timestamp()); INSERT INTO t SELECT generate_series(1, 30000)');
	my $passed = rg_probe_time($probe);
	rg_bg_finish($h);
	my ($reached, $noted) = split /\n/, $h->{stdout};
	is($reached, 't', "round $round: the write reaches the target");
	# a lost notification would leave it to the 1 s safety net: a wake-up
	# in the first fifth of that second by chance is unlikely three times
	my ($lag, $in_queue) = rg_wake_lag($noted, $passed, $queued);
	cmp_ok((($noted // '') =~ s/\|.*//r) - $written, '>=', 0, "round $round: returned after the write");
	cmp_ok($lag, '<', 200,
		"round $round: the waiter returns within 200 ms of replay passing its target ("
		  . sprintf('%.0f ms, besides %.0f ms waiting for a CPU', $lag, $in_queue) . ')');
}

# Received WAL that replay has not applied (here: replay paused) keeps the
# watcher polling, so that replay resuming is noticed at once.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $target = rg_next_lsn($primary);
$primary->safe_psql('postgres', 'INSERT INTO t VALUES (2)');
$primary->wait_for_catchup($standby->name, 'write');
my $h = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$target', 60000)", 'pending');
rg_pid_of($standby, 'pending');
cmp_ok(rg_watcher_runs($standby, 1), '>', 200,
	'the watcher polls while received WAL is not replayed');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($h);
is($h->{stdout}, 't', 'the wait ends once replay resumes');

# A promotion: the walreceiver stops first, so the watcher polls and the
# waiter learns at once that recovery ended.  Dirty buffers make the
# end-of-recovery checkpoint slow, so no other WAL write would wake it.
$primary->safe_psql('postgres', 'INSERT INTO t SELECT g FROM generate_series(1, 100000) g');
$primary->wait_for_catchup($standby->name, 'replay');
# (psql goes on with the second statement after the first one's error)
$h = rg_bg_start($standby,
	[ "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)",
	  'SELECT extract(epoch FROM clock_timestamp())' ],
	'promotion');
rg_pid_of($standby, 'promotion');
sleep 1;
my $promoted = $standby->safe_psql('postgres',
	'SELECT extract(epoch FROM clock_timestamp())');
$standby->promote;
rg_bg_finish($h);
my ($ended) = $h->{stdout} =~ /^([0-9.]+)$/;
like($h->{stderr}, qr/recovery is not in progress/, 'the wait ended with recovery');
cmp_ok(($ended // 99) - $promoted, '<', 0.8,
	'the waiter learns of the promotion within 800 ms');

# An archive-only standby has no walreceiver: replay needs no write into
# pg_wal first, so the watcher polls while someone waits: every
# poll_interval for a target replay could reach within it (the primary's
# next LSN), about every 10 ms for one that lies further than 4 GB/s of
# replay could cover in that time (100 GB ahead).
my $archive = rg_archive_standby($primary, 'archive_standby');

# Times the archive standby's watcher ran in 1 s while a session waited for
# $lsn.
sub archive_runs
{
	my ($lsn, $name) = @_;
	my $bg = rg_bg_start($archive,
		"SELECT replica_gate.wait_for_lsn('$lsn', 60000)", $name);
	rg_pid_of($archive, $name);
	my $runs = rg_watcher_runs($archive, 1);
	$archive->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$name'");
	rg_bg_finish($bg);
	return $runs;
}

cmp_ok(archive_runs(rg_next_lsn($primary), 'near'), '>', 200,
	'without a walreceiver the watcher polls while someone waits');
my $far_runs = archive_runs(rg_next_lsn($primary, 100 * 2**30), 'far');
cmp_ok($far_runs, '>', 20, '... also while the target is far');
cmp_ok($far_runs, '<', 200, "... but less often then ($far_runs runs in 1 s)");

$archive->stop;
$standby->stop;
$primary->stop;
done_testing();
