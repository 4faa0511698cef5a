# Where the replay watcher has to poll (PostgreSQL 13 to 15), it polls only
# while WAL is pending, sleeps while none is, and still wakes waiters within
# milliseconds when new WAL arrives.  The watcher's run count, from
# /proc/PID/schedstat, tells polling (about 2,000 runs a second) from sleep.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

plan skip_all => 'WAL arrival notices need Linux' if $^O ne 'linux';

my ($primary, $standby) = rg_primary_standby();
plan skip_all => 'PostgreSQL 16+ wakes the watcher on the replay condition variable'
  if $standby->pg_version >= 16;

$primary->safe_psql('postgres', 'CREATE TABLE t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');

my $watcher = $standby->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'");

# Times the watcher ran during $seconds.
sub watcher_runs
{
	my ($seconds) = @_;
	my $runs = sub {
		open(my $f, '<', "/proc/$watcher/schedstat") or die "schedstat: $!";
		my @fields = split ' ', <$f>;
		close $f;
		return $fields[2];
	};
	my $before = $runs->();
	sleep $seconds;
	return $runs->() - $before;
}

# The LSN one byte past the primary's WAL: the next commit passes it.
sub next_lsn
{
	my ($hi, $lo) = split m{/},
	  $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	my $lsn = hex($hi) * 2**32 + hex($lo) + 1;
	return sprintf('%X/%X', int($lsn / 2**32), $lsn % 2**32);
}

# Nothing to replay: the watcher sleeps although someone waits, and new WAL
# still ends the wait at once.
for my $round (1 .. 3)
{
	my $target = next_lsn();
	my $h = rg_bg_start($standby,
		"SELECT replica_gate.wait_for_lsn('$target', 60000), extract(epoch FROM clock_timestamp())",
		"quiet$round");
	rg_pid_of($standby, "quiet$round");
	sleep 1;
	cmp_ok(watcher_runs(2), '<', 40,
		"round $round: the watcher sleeps while no WAL is pending");

	my $written = $primary->safe_psql('postgres',
		'SELECT extract(epoch FROM clock_timestamp()); INSERT INTO t VALUES (1)');
	rg_bg_finish($h);
	my ($reached, $returned) = split /\|/, $h->{stdout};
	is($reached, 't', "round $round: the commit is reached");
	# the watcher's safety net re-checks every second: well below that
	cmp_ok($returned - $written, '<', 0.5,
		"round $round: the waiter returns within 500 ms of the write");
}

# Received WAL that replay has not applied (here: replay paused) keeps the
# watcher polling, so that replay resuming is noticed at once.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $target = next_lsn();
$primary->safe_psql('postgres', 'INSERT INTO t VALUES (2)');
$primary->wait_for_catchup($standby->name, 'write');
my $h = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$target', 60000)", 'pending');
rg_pid_of($standby, 'pending');
cmp_ok(watcher_runs(1), '>', 200,
	'the watcher polls while received WAL is not replayed');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($h);
is($h->{stdout}, 't', 'the wait ends once replay resumes');

$standby->stop;
$primary->stop;
done_testing();
