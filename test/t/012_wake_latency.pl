# Wake-up latency for every way replay can reach a waiter's target:
# streaming after idle, the end of recovery_min_apply_delay, resume after
# pause, WAL restored from an archive, promotion, and a timeline switch on a
# standby that follows a promoted primary.  A probe session spins until
# replay passes the target (or recovery ends) and notes the time; the waiter
# must return within a bound of that moment, tied to the mechanism, less
# the time it waited for a CPU once woken (median of 3 rounds, so that one
# scheduling hiccup on a loaded machine does not decide).  It measures the
# gate, not replay: on 13, for example, replay itself resumes up to 1 s
# after pg_wal_replay_resume() (the startup process checks the pause flag
# once a second), and the waiter follows it within the bound.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(sleep);

my $bound_ms = RG_WAKE_BOUND_MS;
# Rounds per cause (the median counts); bench/wake_matrix asks for more and
# collects each cause's lags from the file RG_WAKE_OUT names.
my $rounds = $ENV{RG_WAKE_ROUNDS} // 3;

my ($primary, $standby) = rg_primary_standby();
$primary->safe_psql('postgres', 'CREATE TABLE t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');
my $major = rg_major($standby);

# record($what, @lag): hand a cause's lags to bench/wake_matrix.
sub record
{
	my ($what, @lag) = @_;
	return unless $ENV{RG_WAKE_OUT};
	PostgreSQL::Test::Utils::append_to_file($ENV{RG_WAKE_OUT},
		join("\t", $what, $major, map { sprintf('%.2f', $_) } @lag) . "\n");
}

# One round on $node: start a waiter and the probe for $target, run $event,
# return the waiter's lag behind the probe in ms, less the time it waited
# for a CPU (rg_wake_lag), and the waiter's output.
# Both must be in place before replay passes $target (the probe fails one
# that never saw replay short of it).  Where something besides $event can
# move replay past it first ($early_ok: a timer, or a record the idle
# primary writes on its own, as the running transactions every 15 s), a
# round that came too late returns nothing (its waiter must still have
# succeeded), to be made again; anywhere else the test fails.
sub round
{
	my ($node, $target, $event, $name, $early_ok) = @_;
	my $lsn = rg_token_lsn($target);
	my $s = rg_session($node);
	my $w = rg_bg_start($node,
		rg_woke_at("replica_gate.wait_for_lsn('$lsn'::pg_lsn, 30000)"), "waiter_$name");
	rg_session_until($s, qq{EXISTS (SELECT FROM pg_stat_activity
		 WHERE application_name = 'waiter_$name' AND @{[RG_IN_GATE]})
		 OR pg_last_wal_replay_lsn() >= '$lsn'}, 60)
	  or die "waiter_$name never started waiting";
	my $pid = rg_session_query($s,
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'waiter_$name'");
	$s->{run}->finish;
	my $p = rg_probe_start($node, $lsn, "probe_$name");
	sleep 0.3;
	# (a waiter already gone, where $early_ok, has no count: nothing is
	# taken off its time)
	my $queued = eval { (rg_schedstat($pid))[1] };
	$event->();
	my $passed = eval { rg_probe_time($p) };
	my $failed = $@;
	rg_bg_finish($w);
	if (!defined $passed)
	{
		die $failed unless $early_ok && $failed =~ /at its first look/;
		is($w->{stdout} =~ s/\n.*//sr, 't', "$name: the waiter of a round made again succeeded");
		note("$name: replay passed the target before the waiter and the probe were in place");
		return;
	}
	my ($result, $woke) = split /\n/, $w->{stdout};
	return ((rg_wake_lag($woke, $passed, $queued))[0], $result // $w->{stderr});
}

# $rounds rounds of a cause; checks the waiters succeeded and the median lag.
# $setup->($i, $try) returns a round's node, target and event, and whether
# the round may come too late (then it is set up again, $try counting).
sub cause
{
	my ($what, $bound, $setup, $n) = @_;
	my (@lag, @results);
	$n //= $rounds;
	for my $i (1 .. $n)
	{
		my ($lag, $result);
		for (my $try = 1; !defined $lag; $try++)
		{
			my ($node, $target, $event, $early_ok) = $setup->($i, $try);
			($lag, $result) = round($node, $target, $event,
				"${what}_${i}_$try" =~ s/\W/_/gr, $early_ok);
		}
		push @lag, $lag;
		push @results, $result;
	}
	is(join(',', @results), join(',', ('t') x $n), "$what: every waiter succeeded");
	record($what, @lag);
	my $m = rg_median(@lag);
	cmp_ok($m, '<', $bound,
		sprintf("%s: waiters return %.1f ms (median; %s) after replay passes the target",
			$what, $m, join(', ', map { sprintf('%.1f', $_) } @lag)));
}

# An event: the next write on the primary.
sub next_write
{
	return sub {
		$primary->safe_psql('postgres', 'INSERT INTO t VALUES (1)');
	};
}

# --- streaming after idle -------------------------------------------------------
# (the target is the next record the primary writes, whoever writes it)
cause('streaming after idle', $bound_ms, sub {
	sleep 1;    # idle: on 13 to 15 the watcher sleeps in its quiet state
	return ($standby, rg_next_lsn($primary), next_write(), 1);
});

# --- the end of recovery_min_apply_delay -------------------------------------------
# The delay holds back commit records: the target is a commit's token, and
# the waiter and the probe start after the commit.  If the delay ran out
# first (starting them took over 1.5 s with four versions' suites side by
# side on 2 cores), the round is made again with twice the delay, up to
# 16 s (the waiter's timeout is 30 s).
my $delay_ms = 1000;
sub apply_delay
{
	$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '${delay_ms}ms'");
	$standby->reload;
	$standby->poll_query_until('postgres', "SELECT setting = '$delay_ms'
		FROM pg_settings WHERE name = 'recovery_min_apply_delay'")
	  or die 'the standby never loaded the new recovery_min_apply_delay';
}
apply_delay();
cause('end of apply delay', $bound_ms, sub {
	my ($i, $try) = @_;
	if ($try > 1)
	{
		die "the apply delay ran out before the waiter and the probe started, even at $delay_ms ms"
		  if $delay_ms >= 16000;
		$delay_ms *= 2;
		apply_delay();
	}
	my $token = $primary->safe_psql('postgres',
		'INSERT INTO t VALUES (1); SELECT replica_gate.last_commit_token()');
	return ($standby, $token, sub { }, 1);
});
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = 0");
$standby->reload;
$primary->wait_for_catchup($standby->name, 'replay');

# --- resume after pause ------------------------------------------------------------------
cause('resume after pause', $bound_ms, sub {
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
	my $token = $primary->safe_psql('postgres',
		'INSERT INTO t VALUES (2); SELECT replica_gate.last_commit_token()');
	$primary->wait_for_catchup($standby->name, 'write');
	return ($standby, $token,
		sub { $standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()') });
});

# --- WAL restored from an archive ------------------------------------------------------
my $archive = rg_archive_standby($primary, 'archive_standby',
	"wal_retrieve_retry_interval = '100ms'");
cause('restored from an archive', $bound_ms, sub {
	my $token = $primary->safe_psql('postgres',
		'INSERT INTO t VALUES (3); SELECT replica_gate.last_commit_token()');
	return ($archive, $token,
		sub { $primary->safe_psql('postgres', 'SELECT pg_switch_wal()') });
});
$archive->stop;

# --- a timeline switch on a standby that follows a promoted primary ----------------------
# s1 and s2 stream from the primary; s1 is promoted; s2 follows s1, and
# waits for a token of s1's new timeline.
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->backup('switch');
my ($s1, $s2) = map {
	my $n = PostgreSQL::Test::Cluster->new($_);
	$n->init_from_backup($primary, 'switch', has_streaming => 1);
	$n->append_conf('postgresql.conf', "wal_retrieve_retry_interval = '100ms'");
	$n->start;
	$n
} qw(s1 s2);
$primary->wait_for_catchup($_->name, 'replay') for ($s1, $s2);
$primary->stop;
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'no promotion';
$s1->safe_psql('postgres', 'CREATE TABLE u (v int)');
cause('timeline switch', $bound_ms, sub {
	my $token = $s1->safe_psql('postgres',
		'INSERT INTO u VALUES (1); SELECT replica_gate.last_commit_token()');
	return ($s2, $token, sub {
		$s2->append_conf('postgresql.conf', "primary_conninfo = '" . $s1->connstr . "'");
		$s2->reload;
	});
}, 1);

# --- promotion -----------------------------------------------------------------------------
# A waiter for a target never reached learns that recovery ended: on 16 to
# 18 within the watcher's 100 ms re-check of the replay condition variable.
my $promote_bound = rg_major($s2) >= 16 && !rg_core_wait($s2) ? 300 : $bound_ms;
{
	my $w = rg_bg_start($s2,
		qq{DO \$\$ BEGIN PERFORM replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 30000);
		  EXCEPTION WHEN object_not_in_prerequisite_state THEN
		  RAISE NOTICE 'ended at %|%', extract(epoch FROM clock_timestamp()),
		    @{[ rg_queued_ns('pg_backend_pid()') ]}; END \$\$},
		'promoted');
	my $pid = rg_pid_of($s2, 'promoted');
	my $p = rg_probe_start($s2, 'FFFFFFFF/FFFFFFFF', 'probe');
	sleep 0.3;
	my $queued = (rg_schedstat($pid))[1];
	$s2->promote;
	my $passed = rg_probe_time($p);
	rg_bg_finish($w);
	my ($ended) = $w->{stderr} =~ /ended at ([0-9.]+\|\d+)/;
	ok(defined $ended, 'promotion: the waiter learns that recovery ended') or diag($w->{stderr});
	my ($lag) = rg_wake_lag($ended, $passed, $queued);
	record('promotion', $lag);
	cmp_ok($lag, '<', $promote_bound,
		sprintf('promotion: the waiter ends %.1f ms after recovery ended', $lag));
}

$s2->stop;
$s1->stop;
done_testing();
