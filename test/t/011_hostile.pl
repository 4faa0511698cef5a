# Hostile conditions with waiters in flight: the primary crashes and
# restarts, the walreceiver is terminated, a partition (the standby's
# primary_conninfo points at a listener that accepts and never answers),
# replay paused longer than max_timeout, every connection slot taken by
# waiting sessions, the replay watcher terminated, the standby restarted.
# Every waiter must end by success or its timeout, none past max_timeout,
# none claim a target that was not replayed, no registry slot may leak, and
# the server may log no crash.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday sleep tv_interval);

# Every wait is cut to 3 s; a waiter that is still there 4 s later hangs.
my $max_timeout = 3;
my $hang = $max_timeout + 4;
my ($primary, $standby) = rg_primary_standby(
	primary_conf => "max_connections = 20\n",
	standby_conf => "max_connections = 20\nreplica_gate.max_timeout = '${max_timeout}s'\n"
	  . "wal_retrieve_retry_interval = '100ms'\n");
$primary->safe_psql('postgres', 'CREATE TABLE t (v int); INSERT INTO t VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

# Start $n waiters for $target (60 s asked, cut to max_timeout), each
# touching $name_in.<i> in the standby's folder once connected (psql runs
# its commands only then) and starting its gate once all are connected,
# and, with $go, once that file exists; without, return once all sleep in
# their gates.  The test looks at all of them at once, and if one ended
# before it saw all sleep, it starts them anew: a loaded machine took
# longer than max_timeout to start 20 psql, and the first waiters had timed
# out and left; it took 3.2 s to look at three waiters one after the
# other, and the third had left.
sub waiters
{
	my ($n, $target, $name, $go) = @_;
	my $lsn = $target =~ /:/ ? "split_part('$target', ':', 2)::pg_lsn" : "'$target'::pg_lsn";
	my $gate = "SELECT replica_gate.wait_for_lsn('$target', 60000), pg_last_wal_replay_lsn() >= $lsn, "
	  . 'extract(epoch FROM clock_timestamp() - statement_timestamp())';
	my $marks = $standby->basedir . "/${name}_in";
	my $sessions = "FROM pg_stat_activity WHERE application_name LIKE '${name}\\_%'";
	my $until = "[ \$(ls $marks.* | wc -l) -lt $n ]" . ($go ? " || [ ! -e $go ]" : '');
	for (1 .. 5)
	{
		my @w = map {
			rg_bg_start($standby, [ "\\! touch $marks.$_", "\\! while $until; do sleep 0.02; done", $gate ],
				"${name}_$_")
		} 1 .. $n;
		return @w if $go;
		my $looking = [gettimeofday];
		while (tv_interval($looking) < 60)
		{
			my ($asleep, $in) = split /\|/, $standby->safe_psql('postgres',
				"SELECT count(*) FILTER (WHERE @{[RG_IN_GATE]}), count(*) $sessions");
			if ($asleep == $n)
			{
				$_->{start} = [gettimeofday] for @w;
				return @w;
			}
			last if $in < $n && scalar(() = glob("$marks.*")) == $n;
			sleep 0.05;
		}
		# (those started anew are checked as the others: none may claim a
		# target that was not replayed)
		rg_bg_finish($_) for @w;
		$_->{stdout} !~ /^t\|f\|/ or die "a waiter of $name claimed a target not replayed: $_->{stdout}"
		  for @w;
		unlink glob("$marks.*");
		$standby->poll_query_until('postgres', "SELECT count(*) = 0 $sessions")
		  or die "the waiters of $name never left";
	}
	die "the $n waiters of $name never all slept at once";
}

# Every waiter ended in time, and none claimed a target it had not replayed.
# A gate that returned says how long it waited, in the server: the test's
# clock, when it collects the waiter, adds what a loaded machine delays
# the test by (the crowd's were collected after a connection attempt of
# 6.6 s); it tells only for a waiter that ended by an error.  Sets result:
# the gate's and the replay check's.
sub check_waiters
{
	my ($what, @w) = @_;
	my ($late, $lied, $ended) = (0, 0, 0);
	foreach my $h (@w)
	{
		rg_bg_finish($h);
		my $waited;
		($h->{result}, $waited) = $h->{stdout} =~ /^([tf]\|[tf])\|([0-9.]+)$/;
		$h->{result} //= '';
		$late++ if ($waited // $h->{elapsed}) > $hang;
		$lied++ if $h->{result} eq 't|f';
		$ended++ if $h->{result} ne '' || $h->{stderr} =~ /ERROR|FATAL|terminat/;
	}
	is($ended, scalar @w, "$what: every waiter ended");
	is($late, 0, "$what: none waited past max_timeout");
	is($lied, 0, "$what: none claimed a target that was not replayed");
	ok($standby->poll_query_until('postgres', 'SELECT replica_gate.waiters() = 0'),
		"$what: no registry slot left");
}

my $beyond = 'FFFFFFFF/FFFFFFFF';

# --- the primary crashes and restarts ----------------------------------------
my @w = waiters(3, $beyond, 'crash');
$primary->stop('immediate');
$primary->start;
check_waiters('primary crash and restart', @w);

# --- the walreceiver is terminated ---------------------------------------------
$standby->poll_query_until('postgres', 'SELECT count(*) = 1 FROM pg_stat_wal_receiver')
  or die 'no walreceiver';
my $token = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (1); SELECT replica_gate.last_commit_token()');
@w = waiters(3, $beyond, 'walrcv');
$standby->safe_psql('postgres',
	'SELECT pg_terminate_backend(pid) FROM pg_stat_wal_receiver');
check_waiters('walreceiver terminated', @w);
is( $standby->safe_psql('postgres', "SELECT replica_gate.require_lsn('$token', 30000); SELECT 'ok'"),
	"\nok", 'gates work again once the walreceiver is back');

# --- a partition: the upstream accepts and never answers -----------------------
my $hole = rg_partition($standby);
$token = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (2); SELECT replica_gate.last_commit_token()');
@w = waiters(3, $token, 'partition');
check_waiters('partition', @w);
close $hole;
$standby->append_conf('postgresql.conf', "primary_conninfo = '" . $primary->connstr . "'");
$standby->reload;
$primary->wait_for_catchup($standby->name, 'replay');

# --- replay paused for longer than max_timeout ---------------------------------
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$token = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (3); SELECT replica_gate.last_commit_token()');
@w = waiters(3, $token, 'paused');
sleep $max_timeout + 1;
check_waiters('replay paused past max_timeout', @w);
is($w[0]->{result}, 'f|f', 'a paused waiter times out: false, and its target is indeed not replayed');

# --- the replay watcher is terminated while sessions wait (13 to 18) ------------
SKIP:
{
	skip 'PostgreSQL 19+ has no replay watcher: core wakes waiters', 6
	  if rg_core_wait($standby);
	# The watcher is terminated and, once it has exited, replay resumes, in
	# one statement: two psql started one after the other on a loaded
	# machine resumed replay after the gates' max_timeout.
	@w = waiters(3, $token, 'watcher');
	$standby->safe_psql('postgres', q{DO $$BEGIN
  PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE backend_type = 'replica_gate replay watcher';
  WHILE EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher') LOOP
    PERFORM pg_sleep(0.001);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
  PERFORM pg_wal_replay_resume();
END$$});
	check_waiters('watcher terminated', @w);
	is(join(',', map { $_->{result} } @w), 't|t,t|t,t|t',
		'the waiters fell back to polling and saw their target replayed');
	ok( $standby->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'"),
		'the watcher is back');
}
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby->name, 'replay');

# --- every connection slot taken by waiting sessions ------------------------------
# Nobody can connect to resume replay: every waiter must end by its timeout.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$token = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (4); SELECT replica_gate.last_commit_token()');
# No connection of the test's own until all 20 are in: it could take the
# last slot from a waiter.  Each waiter marks a file once connected, and
# starts its gate once the test has tried to connect: none has timed out
# and left before the attempt, however late a loaded machine lets the test
# make it (6.6 s once, when the gates started with the last mark).
my $go = $standby->basedir . '/crowd_go';
@w = waiters(20, $token, 'crowd', $go);
my $marks = $standby->basedir . '/crowd_in';
my $waited = 0;
sleep 0.05 while ($waited++ < 2400 && scalar(() = glob("$marks.*")) < 20);
is(scalar(() = glob("$marks.*")), 20, 'the 20 waiters are connected');
my ($ret, $out, $err) = $standby->psql('postgres', 'SELECT 1');
like($err, qr/too many clients|remaining connection slots/,
	'every connection slot is taken by a waiter');
# their gates start now: their time to max_timeout counts from here
PostgreSQL::Test::Utils::append_to_file($go, '');
$_->{start} = [gettimeofday] for @w;
check_waiters('all connection slots taken', @w);
is(scalar(grep { $_->{result} eq 'f|f' } @w), 20, 'all 20 timed out, none claimed the write');

# --- the standby restarts under waiters -------------------------------------------
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
@w = waiters(3, $beyond, 'restart');
$standby->restart;
check_waiters('standby restart', @w);

# --- the postmaster dies under a waiter ----------------------------------------------
# The waiter (its own 60 s budget) must exit at once, not sleep out its
# wait as an orphan: then the cluster starts again, which it could not while
# an orphaned backend still held its shared memory.
my $w = rg_bg_start($standby,
	"SET replica_gate.max_timeout = 60000; SELECT replica_gate.wait_for_lsn('$beyond', 60000)",
	'orphan');
my $orphan = rg_pid_of($standby, 'orphan');
kill 'KILL', $standby->{_pid};
rg_bg_finish($w);
cmp_ok($w->{elapsed}, '<', 10, "postmaster death: the waiter's session ended at once ($w->{elapsed}s)");
my $gone = 0;
for (1 .. 100)
{
	$gone = !kill(0, $orphan) and last;
	sleep 0.1;
}
ok($gone, 'postmaster death: the waiting backend exited');
# (pg_ctl directly: the node object still knows the killed postmaster)
PostgreSQL::Test::Utils::system_or_bail('pg_ctl', '-D', $standby->data_dir,
	'-l', $standby->logfile, '-w', 'start');
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0',
	'postmaster death: the standby starts again, nobody waiting');

$primary->stop;
$standby->stop;
my $log = slurp_file($standby->logfile);
unlike($log, qr/terminated by signal|PANIC|TRAP/,
	'the standby logged no crash (its postmaster was killed, it did not crash)');
unlike(slurp_file($primary->logfile), qr/terminated by signal|PANIC|TRAP/,
	'the primary logged no crash (other than its own immediate stop)');
done_testing();
