# Strong reads without a round trip: the primary makes its commits wait for
# the standbys that hold a lease to apply them, at most
# replica_gate.commit_wait (400 ms here), before acknowledging them, and a
# standby whose newest answer of the primary granted it a lease and is
# younger than that serves a strong read with that answer as its target,
# asking nothing (proof.c, lease.c).  The standbys replay 100 ms behind
# (recovery_min_apply_delay), so that a read that trusted an answer too old,
# or a commit acknowledged before they applied it, would miss a write; and
# so each paying commit waits at least 100 ms.  Strong reads run on both
# standbys in the background throughout, so that they hold leases.
#
#   - a history checker over strong reads (simple protocol, prepared
#     statements, pipelines) finds no read missing a write acknowledged
#     before it began, while most strong reads are served locally;
#   - the answers stop (the primary's question backend frozen), a write is
#     acknowledged, a strong read begins: its answer is too old, so it asks,
#     and sees the write or fails with RG001, never returns the old value;
#   - a standby that sees the primary's commit clock run twice as fast as
#     its own (its question connection passes through a proxy that scales
#     the clock in each answer, as a primary whose clock ran fast would
#     send it): the clock check fails, no strong read is served locally
#     (a build that ignores the check serves them), and the frozen case
#     above still never returns the old value;
#   - commits of a session with replica_gate.pay_commit_wait = off do not
#     wait; with it off for the whole primary, the standby serves no strong
#     read without a question; logical replication's apply worker pays for
#     each transaction it applies; a procedure's commits wait once, at its end; the SQL of a
#     replication=database connection waits as a client backend's;
#   - no message after a paying commit reaches the client before its wait
#     (a procedure's error or notice after its COMMIT, a cancel by
#     statement_timeout, a CommandComplete asked for by Flush, the token),
#     and none is charged to the next statement;
#   - the bounded mode: reads run while the staleness bound is within the
#     limit, and fail with RG001 while replay is paused.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '400ms'\n",
	standby_conf => "recovery_min_apply_delay = '100ms'\n");
rg_strong_counter($primary, '2s');
$primary->safe_psql('postgres', q{
CREATE PROCEDURE bump(n int) LANGUAGE plpgsql AS
  $$ BEGIN FOR i IN 1..n LOOP UPDATE counter SET v = v + 1; COMMIT; END LOOP; END $$;
});
$primary->wait_for_catchup($standby->name, 'replay');

# A second standby, which asks the primary through a proxy that makes the
# primary's commit clock run twice as fast as it does.
my $proxy_dir = PostgreSQL::Test::Utils::tempdir_short;
my $proxy_out = '';
my $proxy = IPC::Run::start(
	[ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_proxy.py",
	  "$proxy_dir/.s.PGSQL.5432", $primary->host . '/.s.PGSQL.' . $primary->port,
	  "$proxy_dir/hold", 2 ],
	'>', \$proxy_out, '2>', \my $proxy_err);
$proxy->pump until $proxy_out =~ /listening/;
$primary->backup('fast_base');
my $fast = PostgreSQL::Test::Cluster->new('fastclock');
$fast->init_from_backup($primary, 'fast_base', has_streaming => 1);
$fast->append_conf('postgresql.conf',
	"recovery_min_apply_delay = '100ms'\nreplica_gate.primary_conninfo = 'host=$proxy_dir port=5432'\n");
$fast->start;
$primary->wait_for_catchup($fast->name, 'replay');

is($primary->safe_psql('postgres', 'SELECT commit_wait FROM replica_gate.status()'),
	'00:00:00.4', 'the primary reports its commit wait');

# Background strong reads on both standbys, 20 a second, each in a session
# of its own (a read that fails does not end them): the standbys hold
# leases from now on.
my @background;
for my $node ($standby, $fast)
{
	my $psql = join ' ', 'psql', '-XAtq', '-U', 'reader', '-h', $node->host, '-p', $node->port,
	  '-d', 'postgres', '-c', "'SELECT v FROM counter'";
	push @background, IPC::Run::start(
		[ 'bash', '-c', "while :; do $psql >/dev/null 2>&1; sleep 0.05; done" ]);
}
$primary->poll_query_until('postgres',
	'SELECT count(*) = 2 FROM replica_gate.leases() WHERE expires_in_ms > 0')
  or die 'the standbys hold no leases';

# --- the commit wait ---------------------------------------------------------
# psql's \timing: the statement's round trip, its commit included; the
# fastest of three, so that a loaded machine cannot make a commit look slow.
my $timed = sub {
	my ($sql, $conninfo) = @_;
	my @ms;
	for (1 .. 3)
	{
		my ($ret, $out, $err) = $primary->psql('postgres', "\\timing on\n$sql",
			$conninfo ? (extra_params => [ '-d', $conninfo ]) : ());
		push @ms, ($out =~ /Time: ([0-9.]+) ms\s*$/) ? $1 : 1e9;
	}
	return (sort { $a <=> $b } @ms)[0];
};
my $paying = $timed->('UPDATE counter SET v = v');
cmp_ok($paying, '>=', 50, "a paying commit waits for the lease holders to apply it ($paying ms)");
my $free = $timed->("SET replica_gate.pay_commit_wait = off;\nUPDATE counter SET v = v");
cmp_ok($free, '<', 50, "with replica_gate.pay_commit_wait off it does not ($free ms)");
my $walsender = $timed->('UPDATE counter SET v = v',
	$primary->connstr('postgres') . ' replication=database');
cmp_ok($walsender, '>=', 50,
	"so does a commit over a replication=database connection ($walsender ms)");
my $proc = $timed->('CALL bump(5)');
cmp_ok($proc, '<', 5 * 50, "a procedure's five commits wait once, at its end ($proc ms)");
cmp_ok($proc, '>=', 50, 'but they do wait');

# --- no client hears of a commit before its wait -------------------------------
# Whatever the first message after a paying commit is (an error, a notice,
# the CommandComplete a Flush asks for, the token's ParameterStatus), it
# leaves the primary only once the lease holders have applied it; the statement
# after it is not charged for it.  rg_ack.py times each message as it
# arrives; each case runs three times.  The standby applies a commit no
# sooner than 100 ms after it (recovery_min_apply_delay), so its first
# message leaves no sooner than 100 ms after the statement was sent; a
# build that does not hold it sends it within a few ms, or, for
# statement_timeout, at the timeout (30 ms): the bound is 50 ms.
$primary->safe_psql('postgres', q{
CREATE PROCEDURE commit_then_fail() LANGUAGE plpgsql AS
  $$ BEGIN UPDATE counter SET v = v + 1; COMMIT; RAISE EXCEPTION 'failed after its commit'; END $$;
CREATE PROCEDURE commit_then_reraise() LANGUAGE plpgsql AS
  $$ BEGIN UPDATE counter SET v = v + 1; COMMIT;
       BEGIN RAISE EXCEPTION 'failed after its commit';
       EXCEPTION WHEN others THEN RAISE; END; END $$;
CREATE PROCEDURE commit_then_notice() LANGUAGE plpgsql AS
  $$ BEGIN UPDATE counter SET v = v + 1; COMMIT; RAISE NOTICE 'committed'; PERFORM pg_sleep(0.2); END $$;
CREATE PROCEDURE commit_then_sleep() LANGUAGE plpgsql AS
  $$ BEGIN UPDATE counter SET v = v + 1; COMMIT; PERFORM pg_sleep(1); END $$;
CREATE PROCEDURE commit_only() LANGUAGE plpgsql AS
  $$ BEGIN UPDATE counter SET v = v + 1; COMMIT; END $$;
});
my @ack_cases = (
	[ 'a procedure that commits then raises', 'simple', 'CALL commit_then_fail()', 'E P0001' ],
	[ 'an error re-raised from an exception block', 'simple', 'CALL commit_then_reraise()', 'E P0001' ],
	[ 'a DO block that commits then raises', 'simple',
	  q{DO $$ BEGIN UPDATE counter SET v = v + 1; COMMIT; RAISE EXCEPTION 'failed'; END $$}, 'E P0001' ],
	[ 'a notice after the commit', 'simple', 'CALL commit_then_notice()', 'N committed' ],
	[ 'statement_timeout after the commit', 'simple', 'CALL commit_then_sleep()', 'E 57014',
	  '-c statement_timeout=30ms' ],
	[ "a CALL's CommandComplete asked for by Flush", 'flush', 'CALL commit_only()', 'C CALL' ],
	[ 'a plain commit', 'simple', 'UPDATE counter SET v = v + 1', 'S replica_gate.last_commit_token=' ]);
for my $case (@ack_cases)
{
	my ($name, $mode, $sql, $first, $options) = @$case;
	my ($earliest, $next, $seen, $made) = (1e9, 1e9, '', 0);
	# (statement_timeout may fire before the COMMIT on a loaded machine:
	# only a run that committed tells when its commit was acknowledged, so
	# that case runs until three have, ten times at most, and needs one)
	for (1 .. ($options ? 10 : 3))
	{
		last if $made == 3;
		local $ENV{RG_ACK_OPTIONS} = $options // '';
		my ($out, $err) = ('', '');
		my $before = $primary->safe_psql('postgres', 'SELECT v FROM counter');
		IPC::Run::run(
			[ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_ack.py",
			  $primary->host, $primary->port, 'postgres', $mode, $sql ],
			'>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		diag("$name: $err") if $err;
		next if $primary->safe_psql('postgres', 'SELECT v FROM counter') == $before;
		$made++;
		my ($mine, $later) = split /^-- next\n/m, $out;
		my ($ms) = ($mine // '') =~ /^([0-9.]+) /m;
		my ($next_ms) = ($later // '') =~ /^([0-9.]+) /m;
		$earliest = $ms if defined $ms && $ms < $earliest;
		$next = $next_ms if defined $next_ms && $next_ms < $next;
		$seen = $mine // "nothing: $out";
	}
	cmp_ok($made, '>=', $options ? 1 : 3, "$name: $made runs committed");
	like($seen, qr/^[0-9.]+ \Q$first\E/m, "$name: the client got what it should")
	  or diag($seen);
	cmp_ok($earliest, '>=', 50, "$name: the first message left after the commit wait ($earliest ms)");
	cmp_ok($next, '<', 25, "$name: the next statement is not charged for it ($next ms)");
}

# --- a history checker --------------------------------------------------------
sub history
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
	my ($hout, $herr) = ('', '');
	IPC::Run::run(
		[ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_history.py",
		  $primary->connstr('postgres'), $node->connstr('postgres') . ' user=reader', 6,
		  'simple:role', 'prepared:role', 'pipeline:role' ],
		'>', \$hout, '2>', \$herr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	diag($herr) if $herr;
	my %r;
	for my $line (split /\n/, $hout)
	{
		my ($kind, $reads, $violations) =
		  $line =~ /"reader": "([^"]+)", "reads": (\d+), "violations": (\d+)/ or next;
		$r{$kind} = [ $reads, $violations, $line ];
	}
	my ($strong, $local) = split /\|/,
	  $node->safe_psql('postgres', 'SELECT strong_reads, strong_reads_local FROM replica_gate.stats');
	return (\%r, $strong, $local);
}

my ($r, $strong, $local) = history($standby);
for my $kind (sort keys %$r)
{
	cmp_ok($r->{$kind}[0], '>', 20, "$kind: strong reads ran ($r->{$kind}[0])");
	is($r->{$kind}[1], 0, "$kind: no strong read missed a write acknowledged before it began")
	  or diag($r->{$kind}[2]);
}
cmp_ok($local, '>', $strong / 2,
	"most strong reads were served without a question ($local of $strong)");

# --- the answers stop -----------------------------------------------------------
# While strong reads keep the answers fresh and the primary is idle (so
# that the newest answer is replayed), replay is paused and the primary's
# backends that answer are frozen: the newest answer ages.  A write is
# acknowledged, then a strong read begins: an answer from before the write
# must not serve it.
sub frozen_answers
{
	my ($node, $name) = @_;
	my $stale = 0;
	for my $round (1 .. 3)
	{
		$node->safe_psql('postgres', 'SELECT v FROM counter', extra_params => [ '-U', 'reader' ]);
		usleep(300_000);
		rg_pause_replay($node);
		my @qpids = split /\n/, $primary->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE application_name = 'replica_gate question'");
		kill 'STOP', @qpids;
		my $v = $primary->safe_psql('postgres', 'UPDATE counter SET v = v + 1 RETURNING v');
		my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT v FROM counter",
			extra_params => [ '-U', 'reader' ]);
		kill 'CONT', @qpids;
		$node->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
		$stale++ if $out ne '' && $out < $v;
		like($out eq '' ? $err : "saw $out", qr/saw $v|RG001/,
			"$name, round $round: the read saw the write or raised RG001")
		  or diag("out: $out err: $err");
		$primary->wait_for_catchup($node->name, 'replay');
	}
	is($stale, 0, "$name: no read returned the value from before the write");
}
frozen_answers($standby, 'answers stopped');

# --- the primary's clock runs twice as fast ------------------------------------------
# Its commits would wait half the time the standby counts on: the check
# must see it in the answers and serve nothing locally.
($r, $strong, $local) = history($fast);
for my $kind (sort keys %$r)
{
	is($r->{$kind}[1], 0, "fast primary clock, $kind: no strong read missed a write")
	  or diag($r->{$kind}[2]);
}
cmp_ok($strong, '>', 20, "fast primary clock: strong reads ran ($strong)");
is($local, 0,
	'fast primary clock: the clock check fails, no strong read is served without a question');
frozen_answers($fast, 'fast primary clock, answers stopped');

# --- background workers pay too ----------------------------------------------------
# Logical replication's apply worker on this primary commits what another
# server publishes: each applied transaction waits for the lease holders, at
# its end, before the worker goes on.
my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;
$pub->safe_psql('postgres',
	'CREATE TABLE applied (n int); CREATE PUBLICATION rg_pub FOR TABLE applied');
$primary->safe_psql('postgres', 'CREATE TABLE applied (n int)');
$primary->safe_psql('postgres',
	"CREATE SUBSCRIPTION rg_sub CONNECTION 'host=" . $pub->host . ' port=' . $pub->port
	  . " dbname=postgres' PUBLICATION rg_pub WITH (copy_data = false)");
$pub->wait_for_catchup('rg_sub');
my $applying = [gettimeofday];
$pub->safe_psql('postgres', join ";\n", map { "INSERT INTO applied VALUES ($_)" } 1 .. 20);
$primary->poll_query_until('postgres', 'SELECT count(*) = 20 FROM applied')
  or die 'the subscription did not apply the 20 transactions';
my $applied = tv_interval($applying);
# The 20th transaction is visible when its wait begins: 19 waits at least.
cmp_ok($applied, '>=', 19 * 0.05,
	"the apply worker waits for the lease holders after each transaction (20 in $applied s)");
$primary->safe_psql('postgres', 'DROP SUBSCRIPTION rg_sub');
$pub->stop;

# --- the primary's default stops paying -------------------------------------------
# replica_gate.pay_commit_wait = off for the whole server leaves most
# commits unpaid: the standby learns it from its next answers and serves no
# strong read without a question until it is on again.
sub local_after
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
	for (1 .. 20)
	{
		$node->safe_psql('postgres', 'SELECT v FROM counter', extra_params => [ '-U', 'reader' ]);
		usleep(20_000);
	}
	return $node->safe_psql('postgres', 'SELECT strong_reads_local FROM replica_gate.stats');
}
$primary->safe_psql('postgres', 'ALTER SYSTEM SET replica_gate.pay_commit_wait = off');
$primary->reload;
usleep(300_000);
is(local_after($standby), 0,
	'pay_commit_wait off on the primary: no strong read is served without a question');
$primary->safe_psql('postgres', 'ALTER SYSTEM RESET replica_gate.pay_commit_wait');
$primary->reload;
# (on a loaded machine the standby may need a while to show again that it
# keeps up, and the clocks' check to hold)
my $again = [gettimeofday];
my $local_again = 0;
$local_again = local_after($standby) until $local_again > 0 || tv_interval($again) > 20;
cmp_ok($local_again, '>', 0, 'on again: strong reads are served without a question');

# --- bounded staleness ---------------------------------------------------------------
sub bounded_read
{
	local $ENV{PGOPTIONS} = '-c replica_gate.consistency=bounded '
	  . '-c replica_gate.max_staleness=1s -c replica_gate.default_timeout=500ms';
	return ($standby->psql('postgres', "\\set VERBOSITY verbose\nSELECT v FROM counter"))[ 1, 2 ];
}
$primary->wait_for_catchup($standby->name, 'replay');
my ($out, $err) = bounded_read();
like($out, qr/^\d+$/, 'bounded: a read runs while the standby is within the limit') or diag($err);
rg_pause_replay($standby);
$primary->safe_psql('postgres', 'UPDATE counter SET v = v + 1');
sleep 2;
($out, $err) = bounded_read();
like($err, qr/RG001: replica is not within 00:00:01 of the primary/,
	'bounded: replay paused for longer than the limit, a read raises RG001');
like($err, qr/gate of the statement on a standby, for replica_gate.consistency = bounded/,
	'its context names the bounded mode');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');

$_->kill_kill foreach @background;
ok($standby->poll_query_until('postgres', 'SELECT replica_gate.waiters() = 0'), 'no waiter left');
$proxy->kill_kill;
done_testing();
