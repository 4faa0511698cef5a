# A standby whose clocks stop while it is frozen, as a virtual machine's do
# while its hypervisor pauses it: when it resumes, its newest answer of the
# primary looks as young as when the pause began, though a paying commit was
# acknowledged during the pause.  The standby runs under libfaketime, every
# process with the offset one file gives; the test freezes every process of
# the standby (SIGSTOP), commits on the primary (acknowledged after its
# 1 s commit wait) while a writer keeps the primary's WAL streaming, sets the
# standby's offset back by the length of the freeze (its clocks resume where
# they stopped), and resumes the standby, all but its question worker.  On
# 16 and later only (see below).
#
#   - a strong read then does not return the value from before the commit:
#     the primary sent WAL later than the standby's clock allows since the
#     answer, so the answer proves nothing, and the read asks (the question
#     worker, still frozen, does not answer: RG001); the server log says
#     why (a build that trusts its clock serves the old value here);
#   - once the worker resumes, strong reads see the commit, and after a new
#     check of the clocks they are served without a question again;
#   - on another standby whose wall clock alone is faked, a step of that
#     clock (+5 s) keeps the next strong read from being served with an
#     answer from before the step; the local path comes back after a new
#     check of the clocks.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my $faketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
plan skip_all => 'libfaketime is not installed' unless -f $faketime;
# Before 16 the postmaster starts background workers from a signal handler,
# which can interrupt libfaketime in its own work: such a worker then reads
# the real clocks while the backends read the faked ones.
my ($major) = `postgres -V` =~ /(\d+)/;
plan skip_all => 'libfaketime cannot fake the clocks of every process before 16'
  if $major < 16;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '1s'\n");
$primary->safe_psql('postgres', q{
CREATE TABLE t (v int);
INSERT INTO t VALUES (1);
CREATE TABLE ticks (n int);
CREATE ROLE reader LOGIN;
GRANT SELECT ON t TO reader;
ALTER ROLE reader SET replica_gate.consistency = 'strong';
ALTER ROLE reader SET replica_gate.default_timeout = '1s';
});

# The standby again, under libfaketime: one offset for all its processes.
my $offset = PostgreSQL::Test::Utils::tempdir_short() . '/offset';
PostgreSQL::Test::Utils::append_to_file($offset, "+0\n");
$standby->stop;
{
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	$standby->start;
}
$primary->wait_for_catchup($standby->name, 'replay');

sub strong_read
{
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\nSELECT v FROM t",
		extra_params => [ '-U', 'reader' ]);
	return $out eq '' ? $err : "saw $out";
}

sub local_reads
{
	return $standby->safe_psql('postgres', 'SELECT strong_reads_local FROM replica_gate.stats');
}

# Strong reads until the clock check holds and they are served locally.
my $start = [gettimeofday];
strong_read() while local_reads() < 5 && tv_interval($start) < 30;
cmp_ok(local_reads(), '>=', 5, 'strong reads are served without a question');

# Replay paused, a strong read is served with the newest answer, and the
# standby freezes right after it, while that answer is fresh.
my $postmaster = $standby->{_pid};
my @children = split /\s+/, `pgrep -P $postmaster`;
my ($worker) = split /\s+/, `pgrep -P $postmaster -f 'replica_gate question'`;
($worker // '') =~ /^\d+$/ or die 'no question worker';
pass("the question worker runs ($worker)");
# (a test that dies while they are stopped must not leave them so)
my @stopped;
END { kill 'CONT', @stopped if @stopped }
@stopped = ($postmaster, @children);
# A standby asks only once its answer is nearly W old, so its lease may have
# little left: strong reads until it has just asked, so that the lease is
# still live when the commit below begins, however slow the machine.
$start = [gettimeofday];
strong_read()
  until $primary->safe_psql('postgres', 'SELECT max(expires_in_ms) > 800 FROM replica_gate.leases()')
  eq 't' || tv_interval($start) > 30;
rg_pause_replay($standby);
like(strong_read(), qr/^saw 1$/, 'the read before the pause sees the old value');
my $frozen = [gettimeofday];
kill 'STOP', $postmaster, @children;

# Meanwhile the primary commits, and a writer (commits that do not pay)
# keeps its WAL streaming to the frozen standby's socket.
my $writer = rg_bg_start($primary,
	[ 'SET replica_gate.pay_commit_wait = off',
	  map { 'INSERT INTO ticks VALUES (1); SELECT pg_sleep(0.02)' } 1 .. 60 ], 'writer');
# The commit begins while the frozen standby's lease is live, and returns
# once it has expired (whether it marks the standby behind depends on where
# in the lease it came: not in its last W / 2, issue 51).
my $live = 'SELECT count(*) FROM replica_gate.leases() WHERE expires_in_ms > 0';
is($primary->safe_psql('postgres', "$live; UPDATE t SET v = 2; $live"), "1\n0",
	"the commit was acknowledged once the frozen standby's lease expired, unapplied");
usleep(200_000);
my $paused = tv_interval($frozen);

# Its clocks resume where they stopped; everything but the worker runs again.
open my $fh, '>', $offset or die "could not write $offset: $!";
printf $fh "-%.6f\n", $paused;
close $fh;
kill 'CONT', $postmaster, grep { $_ != $worker } @children;
usleep(200_000);
my $read = strong_read();
unlike($read, qr/^saw 1$/, 'the strong read after the pause does not return the old value')
  or diag($read);
like($read, qr/RG001/, 'it asked the primary (whose answer the frozen worker holds back): RG001');
like(slurp_file($standby->logfile),
	qr/this standby's clock stopped or was stepped since the primary's last answer/,
	'the log says that the clock stopped');

kill 'CONT', $worker;
rg_bg_finish($writer);
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
ok($standby->poll_query_until('postgres', 'SELECT v = 2 FROM t'), 'the commit is replayed');
like(strong_read(), qr/^saw 2$/, 'with its worker back, a strong read sees the commit');
my $before = local_reads();
$start = [gettimeofday];
strong_read() while local_reads() == $before && tv_interval($start) < 30;
cmp_ok(local_reads(), '>', $before,
	'after a new check of the clocks, strong reads are served without a question again');

# --- a stepped wall clock ----------------------------------------------------------
# Another standby whose wall clock alone is faked (its CLOCK_BOOTTIME is
# the machine's): a step of its wall clock, as NTP or a hypervisor's agent
# makes after a pause, drops the answers' proofs until the clocks are
# checked again.
$primary->backup('step_base');
my $stepped = PostgreSQL::Test::Cluster->new('stepped');
$stepped->init_from_backup($primary, 'step_base', has_streaming => 1);
my $wall = PostgreSQL::Test::Utils::tempdir_short() . '/wall';
PostgreSQL::Test::Utils::append_to_file($wall, "+0\n");
{
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $wall;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	$stepped->start;
}
$primary->wait_for_catchup($stepped->name, 'replay');
$standby = $stepped;
$start = [gettimeofday];
strong_read() while local_reads() < 5 && tv_interval($start) < 30;
cmp_ok(local_reads(), '>=', 5, 'stepped: strong reads are served without a question');
# (its question worker held, so that no answer asked after the step comes)
my $stepped_pm = $stepped->{_pid};
($worker) = split /\s+/, `pgrep -P $stepped_pm -f 'replica_gate question'`;
($worker // '') =~ /^\d+$/ or die 'stepped: no question worker';
pass("stepped: the question worker runs ($worker)");
@stopped = ($worker);
strong_read();
kill 'STOP', $worker;
open $fh, '>', $wall or die "could not write $wall: $!";
print $fh "+5\n";
close $fh;
$before = local_reads();
like(strong_read(), qr/RG001/,
	'stepped: the read after the step is not served with the answer from before it: it asks (RG001)');
kill 'CONT', $worker;
is(local_reads(), $before, 'stepped: no read was served locally after the step');
my ($fell) = slurp_file($stepped->logfile) =~ /clock stopped or was stepped .*\n.*It fell ([0-9.]+) ms behind/;
ok(defined $fell && abs($fell - 5000) < 100,
	'stepped: the log says the wall clock moved by 5 s (' . ($fell // 'nothing') . ' ms)');
$start = [gettimeofday];
strong_read() while local_reads() == $before && tv_interval($start) < 30;
cmp_ok(local_reads(), '>', $before, 'stepped: after a new check, strong reads are served locally again');
done_testing();
