# Bounded staleness, status() and the gate statistics on a real primary and
# standby: the bound stays small on an idle cluster while the apparent lag
# grows; it covers the time replay has been held behind a commit; status()
# counts live waiters; stats count a known sequence exactly; privileges.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my ($primary, $standby) = rg_primary_standby(
	standby_conf =>
	  "wal_receiver_timeout = '1s'\nwal_receiver_status_interval = '1s'\nwal_retrieve_retry_interval = '100ms'\n");
$primary->safe_psql('postgres', 'CREATE TABLE t (v int); INSERT INTO t VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

my $ms = q{extract(epoch FROM %s) * 1000};
my $bound_ms = sprintf($ms, 'replica_gate.staleness()');
my $apparent_ms = sprintf($ms, 'now() - pg_last_xact_replay_timestamp()');

is($primary->safe_psql('postgres', 'SELECT replica_gate.staleness()'),
	'00:00:00', 'staleness is 0 on a primary');

# --- idle cluster: the bound stays small, the apparent lag grows -----------
# (once known: the question worker first finds out that the standby streams
# from the primary; an unknown bound counts as a large one)
#
# Ten samples a second apart, each of a standby that streams on one
# connection and has replayed all the WAL its sender reported, read in the
# same statement before and after the bound: a sample where they differ or
# replay is behind does not count, and the count starts again once the
# bound is known.  In either state the bound is rightly larger: a new
# connection's is unknown until its sender is known to be the primary
# (wal_receiver_timeout = 1s: a walsender that a loaded machine delays
# half a second ends the connection), and while a record is received and
# not yet replayed it is dated by the last commit.  On loaded machines a
# first sample was unknown once, and a last one 11.2 s.
my $stream = q{(SELECT pid || ' ' || status || ' ' || latest_end_lsn || ' ' || pg_last_wal_replay_lsn()
	|| ' ' || (pg_last_wal_replay_lsn() >= latest_end_lsn) FROM pg_stat_wal_receiver)};
my (@bounds, @skipped);
my $apparent;
while (@bounds < 10)
{
	die "the standby never streamed for 10 s on one connection, replayed up: @skipped"
	  if @skipped > 20;
	if (!@bounds)
	{
		$standby->poll_query_until('postgres',
			'SELECT replica_gate.staleness() IS NOT NULL')
		  or die 'the staleness bound never became known';
	}
	sleep 1;
	my ($before, $bound, $after);
	($before, $bound, $apparent, $after) = split /\|/,
	  $standby->safe_psql('postgres',
		"SELECT $stream, coalesce($bound_ms, -1), $apparent_ms, $stream");
	if ($before ne $after || $before !~ / streaming .* true$/
		|| (@bounds && $before !~ /^$bounds[0][1] /))
	{
		push @skipped, "[$before, $bound ms, $after]";
		@bounds = ();
		next;
	}
	push @bounds, [ $bound, $before =~ /^(\d+)/ ];
}
cmp_ok($apparent, '>', 9000,
	"idle for 10 s: now() - pg_last_xact_replay_timestamp() grew to ${apparent} ms");
my @large = grep { $_->[0] < 0 || $_->[0] >= 2000 } @bounds;
is(scalar(@large), 0,
	"while the staleness bound stayed known and below 2 s (samples: @{[ map { $_->[0] } @bounds ]} ms; "
	  . scalar(@skipped) . ' did not count)')
  or diag("samples that did not count: @skipped");

# --- replay held behind a commit: the bound covers the time behind ----------
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $t0 = [gettimeofday];
my $lsn = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (1); SELECT replica_gate.last_commit_token()');
$primary->wait_for_catchup($standby->name, 'flush');
sleep 3;
my $bound = $standby->safe_psql('postgres', "SELECT $bound_ms");
my $behind = tv_interval($t0) * 1000;
cmp_ok($bound, '>=', $behind - 100,
	"paused behind a commit for ${behind} ms: bound ${bound} ms is at least that");

my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_fresh('1s', 200)");
like($err, qr/RG001: replica is not within 00:00:01 of the primary after 200 ms/,
	'require_fresh raises RG001 when the bound is too large');
is($standby->safe_psql('postgres', "SELECT replica_gate.fresh_within('1 hour', 0)"),
	't', 'fresh_within passes a generous limit at once');
is($standby->safe_psql('postgres', "SELECT replica_gate.fresh_within('1s', 100)"),
	'f', 'fresh_within times out on a tight one');

# status() while paused, with live waiters of both kinds.
my $lw = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('$lsn', 60000)", 'lsn_waiter');
my $fw = rg_bg_start($standby, "SELECT replica_gate.fresh_within('1s', 60000)", 'fresh_waiter');
rg_pid_of($standby, 'lsn_waiter');
rg_pid_of($standby, 'fresh_waiter');
is( $standby->safe_psql('postgres',
		'SELECT role, replay_paused, streaming, timeline, waiters, insert_lsn IS NULL, replay_lsn < receive_lsn FROM replica_gate.status()'
	),
	'standby|t|t|1|2|t|t',
	'status(): standby, paused, streaming, timeline 1, two waiters, replay behind receive');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($lw);
rg_bg_finish($fw);
is("$lw->{stdout} $fw->{stdout}", 't t', 'both waiters pass once replay resumes');
is($standby->safe_psql('postgres', 'SELECT waiters FROM replica_gate.status()'),
	'0', 'status() shows no waiter afterwards');

# Waiters that were cancelled or terminated leave no count behind.
my $c = rg_bg_start($standby, "SELECT replica_gate.fresh_within('0', 60000)", 'cancel_me');
my $k = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)", 'kill_me');
my $cpid = rg_pid_of($standby, 'cancel_me');
my $kpid = rg_pid_of($standby, 'kill_me');
is($standby->safe_psql('postgres', 'SELECT waiters FROM replica_gate.status()'),
	'2', 'two live waiters');
$standby->safe_psql('postgres',
	"SELECT pg_cancel_backend($cpid), pg_terminate_backend($kpid)");
rg_bg_finish($c);
rg_bg_finish($k);
ok($standby->poll_query_until('postgres', 'SELECT waiters = 0 FROM replica_gate.status()'),
	'none left after cancel and terminate');

is( $primary->safe_psql('postgres',
		'SELECT role, replay_lsn IS NULL, insert_lsn >= flush_lsn, timeline, staleness FROM replica_gate.status()'
	),
	'primary|t|t|1|00:00:00',
	'status() on the primary');

# --- stats: a known sequence -------------------------------------------------
$standby->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
$standby->safe_psql('postgres',
	"SELECT replica_gate.caught_up('$lsn'), replica_gate.wait_for_lsn('$lsn', 100)");   # 2 immediate
$standby->safe_psql('postgres', "SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')");         # failed check
$standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 50)");  # slept, timeout
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$lsn = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (2); SELECT replica_gate.last_commit_token()');
$lw = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('$lsn', 60000)", 'counted');
rg_pid_of($standby, 'counted');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($lw);                                                                        # slept, reached
$c = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)", 'counted_cancel');
$cpid = rg_pid_of($standby, 'counted_cancel');
$standby->safe_psql('postgres', "SELECT pg_cancel_backend($cpid)");
rg_bg_finish($c);                                                                         # slept, error
is( $standby->safe_psql('postgres',
		'SELECT calls, immediate, waits, timeouts, errors, waits_le_1ms + waits_le_10ms + waits_le_100ms + waits_le_1s + waits_le_10s + waits_gt_10s, max_wait_time >= 50, wait_time > max_wait_time FROM replica_gate.stats'
	),
	'6|2|3|2|1|3|t|t',
	'stats: 6 calls, 2 immediate, 3 waits, 2 timeouts, 1 error, 3 in the histogram');

# --- privileges ----------------------------------------------------------------
$primary->safe_psql('postgres',
	'CREATE ROLE regress_plain LOGIN; CREATE ROLE regress_monitor LOGIN IN ROLE pg_monitor;
	 CREATE ROLE regress_resetter LOGIN;
	 GRANT EXECUTE ON FUNCTION replica_gate.stats_reset() TO regress_resetter');
$primary->wait_for_catchup($standby->name, 'replay');
($ret, $out, $err) = $standby->psql('postgres',
	'SELECT replica_gate.stats_reset()', extra_params => [ '-U', 'regress_plain' ]);
like($err, qr/permission denied for function stats_reset/, 'a plain role cannot reset the stats');
is( $standby->safe_psql('postgres',
		'SELECT count(*) FROM replica_gate.status(), replica_gate.stats, replica_gate.staleness()',
		extra_params => [ '-U', 'regress_plain' ]),
	'1', 'but can read status, stats and staleness');
($ret, $out, $err) = $standby->psql('postgres',
	'SELECT replica_gate.stats_reset()', extra_params => [ '-U', 'regress_monitor' ]);
like($err, qr/permission denied for function stats_reset/,
	'nor can a member of pg_monitor, a read-only monitoring role');
($ret, $out, $err) = $standby->psql('postgres',
	'SELECT replica_gate.stats_reset()', extra_params => [ '-U', 'regress_resetter' ]);
is($ret, 0, 'a role granted EXECUTE can reset the stats');

# --- default settings: the bound is honest, but not tight ---------------------
# With the defaults an idle primary sends nothing until the standby asks for
# a keepalive after wal_receiver_timeout / 2 (30 s) of silence, so the bound
# on an idle standby climbs to about 30 s before it drops.
$primary->backup('defaults_base');
my $defaults = PostgreSQL::Test::Cluster->new('defaults');
$defaults->init_from_backup($primary, 'defaults_base', has_streaming => 1);
$defaults->start;
$primary->wait_for_catchup($defaults->name, 'replay');
# The first call asks the sender whether it is the primary, and the
# question worker answers in the background; only messages the sender sends
# after the answer count, and with these settings the next one may come 30 s
# later.  So write until a write's message lands after the answer.
$defaults->poll_query_until('postgres', 'SELECT streaming FROM replica_gate.status()');
my $writes = 0;
until ($defaults->safe_psql('postgres', 'SELECT replica_gate.staleness() IS NOT NULL') eq 't')
{
	die 'the bound never became known on a standby with default settings' if ++$writes > 100;
	$primary->safe_psql('postgres', 'INSERT INTO t VALUES (3)');
	$primary->wait_for_catchup($defaults->name, 'replay');
}
my ($lowest, $highest) = (1e9, 0);
for (1 .. 36)
{
	sleep 1;
	my $b = $defaults->safe_psql('postgres', "SELECT coalesce($bound_ms, -1)");
	$lowest = $b if $b < $lowest;
	$highest = $b if $b > $highest;
}
cmp_ok($lowest, '>=', 0, 'default settings: the bound is known throughout 36 idle seconds');
cmp_ok($highest, '>', 5000,
	"it climbs well above a second ($highest ms at most): the defaults do not keep it small");
cmp_ok($highest, '<', 32000, 'and stays below wal_receiver_timeout / 2 plus a second');
$defaults->stop;

# --- the primary goes away: the bound is unknown until a message arrives ----------
# A starting walreceiver marks itself streaming, with this server's clock as
# the last message's send time, before it has connected; none of that may
# look fresh.  The primary is down, then a "partition": the standby's
# primary_conninfo points at a listener that accepts and never answers, so
# each walreceiver hangs in its connection attempt.
$primary->stop;
$standby->poll_query_until('postgres',
	'SELECT staleness IS NULL AND NOT streaming FROM replica_gate.status()')
  or die 'the standby never noticed the primary was gone';
my $hole = rg_partition($standby);
my ($fresh, $checks) = (0, 0);
for (1 .. 20)
{
	($ret, $out, $err) = $standby->psql('postgres',
		"SELECT replica_gate.staleness() IS NULL, (SELECT streaming FROM replica_gate.status()); "
		  . "SELECT replica_gate.require_fresh('1 hour', 0)");
	$checks++;
	$fresh++ if $ret == 0 || $out !~ /^t\|f/;
	select(undef, undef, undef, 0.25);
}
is($fresh, 0,
	"primary down, then unreachable: $checks checks over 5 s: staleness unknown, not streaming, require_fresh fails");
like($err, qr/staleness cannot be known/, 'require_fresh says why');
close $hole;
$standby->append_conf('postgresql.conf',
	"primary_conninfo = '" . $primary->connstr . "'");
$standby->reload;
$primary->start;
ok( $standby->poll_query_until('postgres',
		"SELECT staleness < '1 min' AND streaming FROM replica_gate.status()"),
	'the bound is known again once the primary is back');

$primary->stop;
$standby->stop;
done_testing();
