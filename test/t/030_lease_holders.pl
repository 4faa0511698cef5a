# Leases that never lie (issue 50): what may change a lease's holder, who may
# obtain one, and what a strong read on the primary sees.
#
#   - a lease outlives its WAL sender: the standby holding it has its replay
#     paused, its WAL sender is terminated, pg_receivewal (as a WAL archive
#     runs it) takes the freed slot and is granted a lease of its own; the
#     old lease is still listed, under the old pid, and a paying commit
#     waits it out to its end (a build that erases it when the slot's new
#     WAL sender is granted acknowledges the commit at once), and the
#     standby's strong read after the commit never returns the value from
#     before it;
#   - only the standby a WAL sender streams to obtains a lease: a role that
#     is not the WAL sender's, calling grant_lease() with its pid every
#     190 ms, gets none, and paying commits do not wait for a standby that
#     applies 150 ms late and serves no strong reads (a build that grants
#     it makes each wait about 150 ms);
#   - a strong read on the primary that sees a paying commit not yet
#     acknowledged waits until the lease holders have applied it or their
#     leases expired, and a strong read on the standby right after it sees
#     the commit too, or fails (a build whose primary does not wait returns
#     at once, and the standby, served locally, the value from before);
#     with nothing pending it does not wait; after a restart its first one
#     waits W, as a commit does.
#
# W (replica_gate.commit_wait) is 1 s here: a lease granted just before
# the holder stops must outlive the steps that replace its WAL sender by
# enough to tell a commit that waits it out from one that does not.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use File::Temp qw(tempdir);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(usleep);

my $W = 1000;
my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '${W}ms'\n",
	standby_conf => "wal_receiver_status_interval = '10s'\n");
rg_strong_counter($primary, '300ms');
$primary->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
$primary->safe_psql('postgres', 'CREATE TABLE w AS SELECT generate_series(1, 10) AS id, 0 AS v');
$primary->wait_for_catchup($standby->name, 'replay');

# psql's time of the last statement of $sql, in ms.
my $timed = sub {
	my ($sql, $user) = @_;
	my $out = $primary->safe_psql('postgres', "\\timing on\n$sql",
		extra_params => [ $user ? ('-U', $user) : () ]);
	return ($out =~ /Time: ([0-9.]+) ms\s*$/) ? $1 : 1e9;
};
my $strong_read = sub {
	my ($ret, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT v FROM counter", extra_params => [ '-U', 'reader' ]);
	return $ret == 0 ? $out : "error: $err";
};
my $sender_pid = sub {
	my ($name) = @_;
	return $primary->safe_psql('postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = '$name' AND state = 'streaming'");
};
# Strong reads until the standby holds a lease granted less than W / 4 ago.
my $hold_lease = sub {
	my $pid = $sender_pid->($standby->name);
	for (1 .. 200)
	{
		$strong_read->();
		return 1 if $primary->safe_psql('postgres',
			"SELECT count(*) FROM replica_gate.leases() WHERE sender_pid = '$pid' AND expires_in_ms > 3 * $W / 4 AND behind IS NULL") eq '1';
	}
	return 0;
};

# --- a lease outlives its WAL sender ------------------------------------------
# One session on the primary does each step, polling every 5 ms, so that
# little of the lease passes between them.
my $ps = rg_session($primary);
my $until = sub {
	my ($cond) = @_;
	rg_session_until($ps, $cond) or die "never: $cond";
};
ok($hold_lease->(), 'the standby holds a lease');
rg_pause_replay($standby);
ok($hold_lease->(), 'and still does with its replay paused');
my $old = $sender_pid->($standby->name);
my $before = $primary->safe_psql('postgres', 'SELECT v FROM counter');

# the standby's lease granted once more (this session is of its WAL
# sender's role and host, as its question), then its WAL sender ends; the
# standby's startup process, stopped meanwhile, cannot start a new WAL
# receiver before pg_receivewal has taken the freed slot (on 13 one came
# back first)
my ($startup) = split /\s+/, `pgrep -P $standby->{_pid} -f 'startup'`;
($startup // '') =~ /^\d+$/ or die 'no startup process';
END { kill 'CONT', $startup if $startup }
kill 'STOP', $startup;
rg_session_query($ps, "SELECT granted FROM pg_stat_replication r, replica_gate.grant_lease(r.pid, r.backend_start) WHERE r.pid = $old; SELECT pg_terminate_backend($old);");
$until->("NOT EXISTS (SELECT FROM pg_stat_get_wal_senders() WHERE pid = $old)");
my $archive = tempdir(CLEANUP => 1);
my $receivewal = IPC::Run::start(
	[ 'pg_receivewal', '-D', $archive, '-n', '-d', $primary->connstr('postgres') . ' application_name=pg_receivewal' ],
	'>', \my $rw_out, '2>', \my $rw_err);
$until->("EXISTS (SELECT FROM pg_stat_replication WHERE application_name = 'pg_receivewal' AND state = 'streaming')");
# pg_receivewal runs as the same role, over the same kind of socket, as
# this session: the primary grants its WAL sender's lease to this session.
# The commit's wait is timed in the server, from before the lease's time
# left is read to the message after the commit (which pays it), so that no
# wait for a CPU in between can make it look short.
my $out = rg_session_query($ps, qq{
SELECT count(*) FROM pg_stat_replication;
SELECT granted FROM pg_stat_replication r, replica_gate.grant_lease(r.pid, r.backend_start) WHERE r.application_name = 'pg_receivewal';
DO \$\$DECLARE t0 timestamptz := clock_timestamp(); gone float8; BEGIN
  gone := (SELECT coalesce(max(expires_in_ms), 0) FROM replica_gate.leases() WHERE sender_pid = $old);
  UPDATE counter SET v = v + 1;
  COMMIT;
  RAISE NOTICE 'committed';
  RAISE NOTICE 'gone % waited %', gone, extract(epoch FROM clock_timestamp() - t0) * 1000;
END\$\$;});
my ($senders) = split /\n/, $out;
my ($gone, $paying) = $out =~ /gone ([0-9.e+-]+) waited ([0-9.]+)/;
($gone, $paying) = (0, 0) unless defined $paying;
my $remaining = rg_session_query($ps,
	"SELECT coalesce(max(expires_in_ms), 0) FROM replica_gate.leases() WHERE sender_pid = $old;");
my $after = $strong_read->();
kill 'CONT', $startup;
is($senders, 1, 'pg_receivewal streams, from the slot the WAL sender left (the first free one)');
cmp_ok($gone, '>', 200,
	"the lease of the WAL sender that left is still listed under its pid ($gone ms left), pg_receivewal's granted or not")
  or diag($out);
cmp_ok($paying, '>=', ($gone > 200 ? $gone : 200) - 20,
	"a paying commit waits it out to its end ($paying ms)");
cmp_ok($remaining, '<=', 0, 'and it has expired after the commit');
like($after, qr/RG001/,
	'the strong read on its standby after the commit does not return the old value: it asks, and fails')
  or diag("value before the commit: $before");
$receivewal->kill_kill;
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$until->("EXISTS (SELECT FROM pg_stat_replication WHERE application_name = '@{[ $standby->name ]}' AND state = 'streaming')");
$primary->wait_for_catchup($standby->name, 'replay');

# --- only the standby obtains a lease ----------------------------------------------
# It applies 150 ms late and serves no strong reads; mallory, a role that
# is not its WAL sender's, asks for that WAL sender's lease every 190 ms.
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '150ms'\n");
$standby->reload;
usleep(1.5 * $W * 1000);    # the standby's own lease expires
my $target = $sender_pid->($standby->name);
my $start = $primary->safe_psql('postgres', "SELECT backend_start FROM pg_stat_activity WHERE pid = $target");
my $mallory = rg_bg_start($primary,
	[ map { "SELECT granted FROM replica_gate.grant_lease($target, '$start'); SELECT pg_sleep(0.19)" } 1 .. 30 ],
	'mallory user=mallory');
$primary->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'mallory' AND query LIKE '%pg_sleep%'")
  or die 'the calls do not run';
usleep(0.6 * $W * 1000);    # a refused standby would be keeping up by now
my @commits = map { $timed->('UPDATE counter SET v = v + 1') } 1 .. 9;
rg_bg_finish($mallory);
is(join(',', sort { $a cmp $b } grep { $_ ne '' } split /\n/, $mallory->{stdout}), join(',', ('f') x 30),
	'none of the other role\'s 30 calls was granted a lease');
cmp_ok(rg_median(@commits), '<', 50,
	'paying commits do not wait for that standby (median ' . rg_median(@commits) . ' ms)');
# The WAL sender's own role, from its host, names it by its pid and its
# start: a start that is not its own (as when the kernel gave its pid to
# another process) obtains no lease, nor does its pid alone (the question
# of 0.6.0); its own start does, once the standby has shown, at two
# questions W / 2 apart, that it keeps up.
my $ask = sub {
	my $granted = $primary->safe_psql('postgres',
		"SELECT granted FROM replica_gate.grant_lease($_[0])");
	usleep(0.6 * $W * 1000);
	return $granted;
};
is(join(' ', map { $ask->("$target, '$start'::timestamptz + interval '1 microsecond'") } 1 .. 2),
	'f f', 'the WAL sender\'s role, naming another start, obtains no lease');
is($ask->($target), 'f', 'nor naming its pid alone');
is((map { $ask->("$target, '$start'") } 1 .. 2)[1], 't',
	'naming its own pid and start it does, at the second question');
$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = 0\n");
$standby->reload;
$primary->wait_for_catchup($standby->name, 'replay');

# --- a strong read on the primary ----------------------------------------------------
my $reader = rg_session($primary, 'reader');
my $primary_read = sub {
	my $out = rg_session_query($reader, "\\timing on\nSELECT v FROM counter;\n\\timing off");
	my ($v, $ms) = ($out =~ /(\d+)\nTime: ([0-9.]+) ms/);
	return ($v // "error: $out", $ms // 1e9);
};
my ($v, $quiet) = $primary_read->();
cmp_ok($quiet, '<', 50, "with no paying commit pending, a strong read on the primary does not wait ($quiet ms)");

ok($hold_lease->(), 'the standby holds a lease');
rg_pause_replay($standby);
ok($hold_lease->(), 'and still does with its replay paused');
$before = $primary->safe_psql('postgres', 'SELECT v FROM counter');
my $writer = rg_bg_start($primary, 'UPDATE counter SET v = v + 1', 'writer');
# (16 and earlier name an extension's wait event "Extension")
$until->("EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'writer' AND wait_event_type = 'Extension')");
my ($seen, $waited) = $primary_read->();
$after = $strong_read->();
is($seen, $before + 1, 'a strong read on the primary sees the commit still waiting for the standby');
cmp_ok($waited, '>=', 100,
	"and returns only once the standby applied it or its lease expired ($waited ms)");
like($after, qr/^$seen$|RG001/,
	'a strong read on the standby right after it sees that commit, or fails')
  or diag("value before the commit: $before");
$writer->{run}->finish;
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby->name, 'replay');

# --- commits that wait for a paused holder sleep ------------------------------------
# Ten paying commits wait for the paused standby's lease: they sleep on
# their latches until the lease waker (one process) wakes them, instead of
# each looking at the lease table every 0.2 ms (about 2,500 times in half
# a second).  A process's voluntary context switches count its sleeps.
is($primary->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'replica_gate lease waker'"),
	'1', 'the primary runs a lease waker');
rg_pause_replay($standby);
# (pgbench starts the ten at once, each on its own row)
my $script = "$PostgreSQL::Test::Utils::tmp_check/waiter.sql";
PostgreSQL::Test::Utils::append_to_file($script, "UPDATE w SET v = v + 1 WHERE id = :client_id + 1;\n");
ok($hold_lease->(), 'the standby, paused, holds a lease');
my $waiters = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '10', '-t', '1', '-f', $script,
	  '-d', $primary->connstr('postgres') . ' application_name=waiter' ],
	'>', \my $pgbench_out, '2>&1');
$until->("(SELECT count(*) FROM pg_stat_activity WHERE application_name = 'waiter' AND wait_event_type = 'Extension') = 10");
my $switches = sub {
	my %n;
	for my $pid (split /\n/, rg_session_query($ps,
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'waiter';"))
	{
		open(my $fh, '<', "/proc/$pid/status") or next;
		($n{$pid}) = join('', <$fh>) =~ /^voluntary_ctxt_switches:\s*(\d+)/m;
	}
	return \%n;
};
my $before_sleep = $switches->();
usleep(500_000);
my $after_sleep = $switches->();
my @slept = map { $after_sleep->{$_} - $before_sleep->{$_} } grep { defined $after_sleep->{$_} } keys %$before_sleep;
is(scalar(@slept), 10, 'ten commits waited half a second for the lease');
cmp_ok((sort { $b <=> $a } @slept)[0], '<', 50,
	'and each slept through it (at most ' . (sort { $b <=> $a } @slept)[0] . ' voluntary context switches)');
$waiters->finish;
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby->name, 'replay');

# A restarted primary cannot know the leases it granted before: its first
# strong read waits W, as its first paying commit does.
$reader->{in} .= "\\q\n";
$reader->{run}->finish;
$ps->{in} .= "\\q\n";
$ps->{run}->finish;
$primary->restart;
$reader = rg_session($primary, 'reader');
(undef, my $first) = $primary_read->();
cmp_ok($first, '>=', $W * 0.9, "after a restart the first strong read on the primary waits W ($first ms)");
$reader->{in} .= "\\q\n";
$reader->{run}->finish;

done_testing();
