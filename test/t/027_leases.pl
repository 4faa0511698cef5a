# Leases: a paying commit waits for the standbys that hold a lease (those
# that serve strong reads without asking) to apply it, or for their leases
# to expire, and never longer than replica_gate.commit_wait (200 ms here).
#
#   - the first paying commit of a server waits the full W (it cannot know
#     the leases a predecessor granted), and so does the first after a
#     promotion;
#   - with no standby holding a lease, a paying commit does not wait;
#   - with a healthy standby serving strong reads, which applies 30 ms late
#     (so that the WAL receiver's replies sent when the WAL arrives come
#     before the apply), a paying commit waits its apply, well under W: the
#     standby reports it when replay has caught up, however long
#     wal_receiver_status_interval (10 s here); the strong read after it is
#     served locally and sees it;
#   - a lease holder whose replay is paused: the next commit waits for its
#     lease to expire (not less), the strong read after it never returns the
#     value from before (the standby lost its lease: it asks, and fails with
#     RG001), and commits after that do not wait (it gets no new lease until
#     it has applied the commit it let wait);
#   - a lease holder frozen (SIGSTOP): commits wait at most W once, then not
#     at all; thawed, its first strong read does not return an old value;
#   - replica_gate.leases() on the primary shows the lease and its standby's
#     apply position.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use List::Util qw(min);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my $W = 200;
my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '${W}ms'\n",
	standby_conf => "wal_receiver_status_interval = '10s'\nrecovery_min_apply_delay = '30ms'\n");
rg_strong_counter($primary, '300ms');
$primary->wait_for_catchup($standby->name, 'replay');

# A paying commit's round trip, in ms (psql's \timing), after $before.
my $commit_ms = sub {
	my ($node, $before) = @_;
	my $out = ($node // $primary)->safe_psql('postgres',
		($before // '') . "\\timing on\nUPDATE counter SET v = v + 1");
	return ($out =~ /Time: ([0-9.]+) ms\s*$/) ? $1 : 1e9;
};
# The fastest of three paying commits, where none should wait: one slow
# round trip on a loaded machine is not a wait (each waits W where one does).
my $unwaited_ms = sub { return min(map { $commit_ms->() } 1 .. 3) };
# A strong read on the standby: its value, or its error.
my $strong_read = sub {
	my ($node) = @_;
	my ($ret, $out, $err) = ($node // $standby)->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT v FROM counter", extra_params => [ '-U', 'reader' ]);
	return $ret == 0 ? $out : "error: $err";
};
my $local_reads = sub {
	return ($_[0] // $standby)->safe_psql('postgres',
		'SELECT strong_reads_local FROM replica_gate.stats');
};
my $leases = sub {
	return $primary->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE expires_in_ms > 0), count(behind) FROM replica_gate.leases()');
};
# Strong reads until the standby holds a lease granted less than W / 2 ago
# (it must first show, at two questions W / 2 apart, that it keeps up).
my $hold_lease = sub {
	my $held;
	for (1 .. 100)
	{
		$strong_read->();
		$held = $primary->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE expires_in_ms > $W / 2), count(behind) FROM replica_gate.leases()");
		last if $held eq '1|0';
	}
	return $held;
};

# --- a new server knows no leases: its first W waits W --------------------------
# (the setup's commits were the first: start the primary anew)
$primary->restart;
my $first = $commit_ms->();
cmp_ok($first, '>=', $W, "the server's first paying commit waits W ($first ms)");
usleep($W * 1000);
my $alone = $unwaited_ms->();
cmp_ok($alone, '<', $W / 2, "with no standby holding a lease, a paying commit does not wait ($alone ms)");

# --- a healthy lease holder ------------------------------------------------------
# Strong reads make the standby ask, and its answers grant it a lease.
like($hold_lease->(), qr/^1\|0$/, 'the standby holds a lease');
my @held;
my $misses = 0;
for (1 .. 5)
{
	$strong_read->();
	push @held, $commit_ms->();
	my $v = $primary->safe_psql('postgres', 'SELECT v FROM counter');
	$misses++ if $strong_read->() ne $v;
}
@held = sort { $a <=> $b } @held;
cmp_ok($held[2], '<', $W / 2,
	"with a healthy lease holder a paying commit waits its apply, not W (median $held[2] ms)");
is($misses, 0, 'the strong read after each commit sees it');
cmp_ok($local_reads->(), '>', 0, 'and strong reads are served without a question');

# --- an asynchronous paying commit ----------------------------------------------------
# Its record is flushed when its wait begins, as a synchronous commit's is
# before it becomes visible: it waits no longer than one.  Without the
# flush it waits until something flushes WAL: the WAL writer, woken by the
# commit only when it is idle or a page is full (else up to
# wal_writer_delay, 200 ms, later), a synchronous commit, a question
# (every W / 2).  Here the standby applies at once, so that the wait is
# the flush's and the apply's.
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = 0\n");
$standby->reload;
my (@sync, @async);
for (1 .. 7)
{
	$hold_lease->();
	push @sync, $commit_ms->();
	push @async, $commit_ms->(undef, "SET synchronous_commit = off;\n");
}
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '30ms'\n");
$standby->reload;
cmp_ok(rg_median(@async), "<", rg_median(@sync) + 20,
	'with synchronous_commit = off a paying commit waits no longer than a synchronous one (medians '
	  . rg_median(@async) . ' and ' . rg_median(@sync) . ' ms)') or diag("async: @async; sync: @sync");

# --- a commit that became visible just before a lease expired ---------------------------
# The standby keeps up but applies W late: a commit made in the last W / 2
# of its lease, less a margin at each end (one made as it expires finds no
# live lease, and marks nothing in any build), is released when the lease
# expires, before
# the standby could apply it, which does not mark the standby behind (a
# build that marks it does, however late the machine lets the expiry be
# seen: the apply comes W / 2 after it).  The statement grants the
# standby's WAL sender a lease, as a question would (the worker stops
# asking 1 s after the last strong read: a loaded machine took longer to
# start the statement), watches it, and commits when it finds it in that
# window, and only then: a loaded machine let a look every millisecond
# skip a window of 15 ms (the standby applied 30 ms late), so a lease that
# expires unseen is held again and watched anew.
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '${W}ms'\n");
$standby->reload;
my $late_err;
for (1 .. 20)
{
	$hold_lease->();
	(undef, undef, $late_err) = $primary->psql('postgres', qq{DO \$\$DECLARE remaining float8; BEGIN
  FOR i IN 1 .. 10 LOOP
    EXIT WHEN (SELECT granted FROM pg_stat_replication r, replica_gate.grant_lease(r.pid, r.backend_start)
               WHERE r.application_name = '@{[ $standby->name ]}');
    PERFORM pg_sleep($W / 2000.0);
  END LOOP;
  LOOP
    remaining := (SELECT coalesce(max(expires_in_ms), 0) FROM replica_gate.leases());
    EXIT WHEN remaining <= $W / 2 - 25;
    PERFORM pg_sleep((remaining - $W / 4) / 1000);
  END LOOP;
  IF remaining > 25 THEN
    UPDATE counter SET v = v + 1;
    RAISE NOTICE 'committed % ms before the lease expired', remaining;
  END IF;
END\$\$});
	last if $late_err =~ /committed/;
}
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '30ms'\n");
$standby->reload;
my ($before_expiry) = $late_err =~ /committed ([0-9.]+) ms before/;
ok(defined $before_expiry,
	"a commit made in the last W / 2 of the lease (@{[ $before_expiry // 'none' ]} ms before its expiry)")
  or diag($late_err);
like($leases->(), qr/\|0$/, 'does not mark the standby behind');
like($hold_lease->(), qr/^1\|0$/, 'which holds a lease again at its next questions');

# --- a lease holder that stops applying -------------------------------------------
# Replay paused, the commit's statement grants the standby's WAL sender a
# lease just before it commits, as a question would (so that the commit
# finds it live however slow the machine), asking again W / 2 later until
# it is granted: a grant more than 3 W / 2 after the last question finds
# that the standby did not show it keeps up, and refuses (on a loaded
# machine a grant in a statement of its own came that late, and the commit
# after it found no live lease).  A standby whose replay paused before a
# record the primary wrote meanwhile never shows it again: then replay
# resumes, and all of it starts anew.  The commit's wait is measured in its
# session, from its COMMIT to the message after it (which pays it), less
# the time that session waited for a CPU.
my ($before, $paused_err);
for (1 .. 10)
{
	$hold_lease->();
	rg_pause_replay($standby);
	$before = $primary->safe_psql('postgres', 'SELECT v FROM counter');
	my $queued = rg_queued_ns('pg_backend_pid()');
	(undef, undef, $paused_err) = $primary->psql('postgres', qq{DO \$\$DECLARE t0 timestamptz; q0 text; BEGIN
  FOR i IN 1 .. 10 LOOP
    IF (SELECT granted FROM pg_stat_replication r, replica_gate.grant_lease(r.pid, r.backend_start)
        WHERE r.application_name = '@{[ $standby->name ]}') THEN
      UPDATE counter SET v = v + 1;
      COMMIT;
      q0 := $queued;
      t0 := clock_timestamp();
      RAISE NOTICE 'committed';
      RAISE NOTICE 'waited % ms, queued % %', extract(epoch FROM clock_timestamp() - t0) * 1000, q0, $queued;
      RETURN;
    END IF;
    PERFORM pg_sleep($W / 2000.0);
  END LOOP;
END\$\$});
	last if $paused_err =~ /committed/;
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	$primary->wait_for_catchup($standby->name, 'replay');
}
my ($waited, $q0, $q1) = $paused_err =~ /waited ([0-9.]+) ms, queued (\d+) (\d+)/;
my $paused = defined $waited ? $waited - ($q1 - $q0) / 1e6 : 0;
cmp_ok($paused, '>=', $W / 4,
	"replay paused on a lease holder: the commit waits for its lease ($paused ms)")
  or diag($paused_err);
cmp_ok($paused, '<', $W + 100, 'but not more than W');
my $after = $strong_read->();
like($after, qr/RG001/,
	'the strong read after it does not return the old value: the standby asks, and fails')
  or diag("value before the commit: $before");
like($leases->(), qr/\|1$/, 'the standby that let the commit wait is marked behind');
my $unleased = $unwaited_ms->();
cmp_ok($unleased, '<', $W / 2, "the next commit does not wait ($unleased ms)");
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby->name, 'replay');
like($hold_lease->(), qr/^1\|0$/, 'caught up and keeping up, it holds a lease again');

# --- a lease holder frozen ----------------------------------------------------------
$hold_lease->();
my @frozen = ($standby->{_pid},
	split /\n/, `ps -o pid= --ppid $standby->{_pid}`);
kill 'STOP', @frozen;
my $cut = $commit_ms->();
usleep(3 * $W * 1000);
my $after_cut = $unwaited_ms->();
kill 'CONT', @frozen;
cmp_ok($cut, '<', $W + 100, "a frozen lease holder delays a commit at most W ($cut ms)");
cmp_ok($after_cut, '<', $W / 2, "and later commits not at all ($after_cut ms)");
my $v = $primary->safe_psql('postgres', 'SELECT v FROM counter');
like($strong_read->(), qr/^$v$|RG001/, 'thawed, its strong read sees the last write or fails');

# --- a standby that lags more than W ------------------------------------------------
# It applies 500 ms late: under writes (commits that do not pay, every 20 ms)
# it never shows that it keeps up, so it gets no lease, its strong reads all
# ask, and paying commits do not wait for it.  The writes run before its
# first question: on a quiet primary it would keep up, and get a lease (a
# loaded machine that started them late made a paying commit wait 108 ms
# once, on 18).  Whether paying commits wait for it is asked of the lease
# table (every commit waits only for a live lease): their times would also
# count the thawed standby above, still catching up, whose worker asks for
# 1 s after its last strong read and may be granted a lease again meanwhile
# (a commit waited 101 and 120 ms for it, on 15 and 17).
$primary->backup('slow_base');
my $slow = PostgreSQL::Test::Cluster->new('slow');
$slow->init_from_backup($primary, 'slow_base', has_streaming => 1);
$slow->append_conf('postgresql.conf', "recovery_min_apply_delay = '500ms'\n");
$slow->start;
$primary->wait_for_catchup($slow->name, 'replay');
$slow->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
my $ticks = rg_bg_start($primary,
	[ 'SET replica_gate.pay_commit_wait = off',
	  map { 'UPDATE counter SET v = v; SELECT pg_sleep(0.02)' } 1 .. 6000 ], 'ticks');
$primary->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'ticks' AND query LIKE '%pg_sleep%'")
  or die 'the writes do not run';
my ($slow_stale, $slow_leased) = (0, 0);
for (1 .. 20)
{
	$commit_ms->();
	my ($v, $leased) = split /\n/, $primary->safe_psql('postgres', qq{
SELECT v FROM counter;
SELECT count(*) FROM replica_gate.leases() l JOIN pg_stat_replication r ON r.pid = l.sender_pid
  WHERE r.application_name = 'slow' AND l.expires_in_ms > 0});
	$slow_leased += $leased;
	my $read = $strong_read->($slow);
	$slow_stale++ if $read =~ /^\d+$/ && $read < $v;
}
$ticks->{run}->kill_kill;
is($local_reads->($slow), '0', 'a standby 500 ms behind serves no strong read without a question');
is($slow_stale, 0, 'none of its strong reads returned a value from before the commit');
is($slow_leased, 0, 'and it holds no lease after any of the 20 commits: paying commits do not wait for it');
$slow->stop;

# --- a promoted standby waits W at first ---------------------------------------------
$primary->wait_for_catchup($standby->name, 'replay');
$primary->stop;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
my $promoted = $commit_ms->($standby);
cmp_ok($promoted, '>=', $W, "the first paying commit after a promotion waits W ($promoted ms)");

done_testing();
