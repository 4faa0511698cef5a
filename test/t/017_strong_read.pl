# Strong reads: a gate on 'primary' makes a standby ask the primary where it
# is, then wait for that position.  On a real primary and standby (and a
# cascading standby): a history checker over concurrent writes and reads
# (with plain reads as the proof that it can fail), asynchronous commits, an
# idle primary right after a WAL segment switch, shared questions, the
# primary stopped and back, a cascade with and without
# replica_gate.primary_conninfo.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

# Commits reach the standby's snapshots 200 ms late.  No autovacuum: the
# primary stays idle where a test needs it idle.
my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf => "recovery_min_apply_delay = '200ms'\n");
$primary->safe_psql('postgres', 'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

# --- on the primary: its own position, no question --------------------------
my $tli = $primary->safe_psql('postgres', 'SELECT timeline FROM replica_gate.status()');
like($primary->safe_psql('postgres', 'SELECT replica_gate.primary_token()'),
	qr/^$tli:[0-9A-F]+\/[0-9A-F]+$/, 'primary_token() on the primary: its timeline and position');
is( $primary->safe_psql('postgres',
		"SELECT replica_gate.caught_up('primary'), replica_gate.wait_for_lsn('primary', 0); "
		  . "SELECT replica_gate.require_lsn('primary', 0); SET replica_gate.require_lsn = 'primary'; SELECT 1"),
	"t|t\n\n1", 'every gate form passes at once on the primary');

# --- a write the standby has not replayed ------------------------------------
rg_pause_replay($standby);
$primary->safe_psql('postgres', 'UPDATE counter SET v = 1');
is($standby->safe_psql('postgres', 'SELECT v FROM counter'), '0', 'a plain read on the standby is stale');
is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('primary')"),
	'f', "caught_up('primary') is false");
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('primary', 200)"),
	'f', "wait_for_lsn('primary', 200) is false");
my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('primary', 300); SELECT v FROM counter");
like($err, qr/RG001: timed out after 300 ms waiting for target $tli:[0-9A-F\/]+ to be replayed/,
	"require_lsn('primary') raises RG001 naming the primary's position");
is($out, '', 'and the read did not run');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.require_lsn = 'primary'");
like($err, qr/RG001/, "SET replica_gate.require_lsn = 'primary' raises RG001");
my $answer = $standby->safe_psql('postgres', 'SELECT replica_gate.primary_token(2000)');
like($answer, qr/^$tli:/, "primary_token() on the standby: the primary's timeline");

# A gate waiting when replay resumes passes and sees the write.
my $bg = rg_bg_start($standby,
	"SELECT replica_gate.require_lsn('primary', 10000); SELECT v FROM counter", 'strong_resume');
usleep(300_000);
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($bg);
is($bg->{stdout}, "\n1", 'a strong read waiting when replay resumes sees the write');

# --- history checker ---------------------------------------------------------
# A writer increments the counter, and records after each commit the
# primary's clock (at or after the moment COMMIT returned).  Readers on the
# standby record the clock before each read's statement, then read.  A
# violation is a read that missed a value whose commit returned before the
# read began.  Plain reads under a 200 ms apply delay must show violations:
# the checker can fail.
my $writes = 300;
my $wfile = "${PostgreSQL::Test::Utils::tmp_check}/writer.sql";
open(my $wf, '>', $wfile) or die;
print $wf "UPDATE counter SET v = $_;\nSELECT $_, extract(epoch FROM clock_timestamp()), pg_sleep(0.01);\n"
  for 2 .. $writes + 1;
close $wf;

# reader script: $gate is the statement sent with the read in one query string
sub reader_script
{
	my ($name, $gate, $reads) = @_;
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/$name.sql";
	open(my $f, '>', $file) or die;
	print $f "\\set VERBOSITY verbose\n";	# errors with their SQLSTATE
	for (1 .. $reads)
	{
		print $f "SELECT extract(epoch FROM clock_timestamp()) AS t0 \\gset\n";
		print $f "$gate \\; " if $gate;
		print $f "SELECT 'read', :t0, v FROM counter;\nSELECT pg_sleep(0.02);\n";
	}
	close $f;
	return $file;
}

sub run_psql_file
{
	my ($node, $file) = @_;
	my $h = { out => '', err => '' };
	$h->{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', $file ],
		'<', \undef, '>', \$h->{out}, '2>', \$h->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

# Returns (reads, violations, failed gates) of the reader outputs, given the
# writer's output.
sub check_history
{
	my ($writer_out, @readers) = @_;
	my @acks = map { [ split /\|/ ] } grep { /^\d+\|/ } split /\n/, $writer_out;
	my ($reads, $violations, $failed) = (0, 0, 0);
	for my $r (@readers)
	{
		$failed += () = $r->{err} =~ /RG001/g;
		for my $line (grep { /^read\|/ } split /\n/, $r->{out})
		{
			my (undef, $t0, $v) = split /\|/, $line;
			my $acked = 1;
			$_->[1] < $t0 and $_->[0] > $acked and $acked = $_->[0] for @acks;
			$reads++;
			if ($v < $acked)
			{
				$violations++;
				diag("read began at $t0 saw $v, but $acked was acknowledged before")
				  if $violations <= 3 && $r->{strong};
			}
		}
	}
	return ($reads, $violations, $failed);
}

$primary->safe_psql('postgres', 'UPDATE counter SET v = 1');
$primary->wait_for_catchup($standby->name, 'replay');
$standby->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
my $writer = run_psql_file($primary, $wfile);
my @strong = map {
	my $h = run_psql_file($standby,
		reader_script("strong$_", "SELECT replica_gate.require_lsn('primary', 5000)", 15));
	$h->{strong} = 1;
	$h
} 1 .. 3;
my $plain = run_psql_file($standby, reader_script('plain', '', 60));
$_->{run}->finish for ($writer, @strong, $plain);
my ($reads, $violations, $failed) = check_history($writer->{out}, @strong);
is($reads + $failed, 45, 'strong readers: every read ran or was refused')
  or diag(join("\n", map { $_->{err} } @strong));
is($violations, 0, "strong reads: no read missed a write acknowledged before it began ($reads reads)");
cmp_ok($failed, '<=', 2, "strong reads: at most 2 of 45 refused ($failed)");
my ($preads, $pviolations) = check_history($writer->{out}, $plain);
cmp_ok($pviolations, '>', 0,
	"plain reads: the checker finds violations ($pviolations of $preads): it can fail");
note("history: $reads strong reads, $violations violations; $preads plain reads, $pviolations violations");

# --- an asynchronous commit ---------------------------------------------------
# Its COMMIT returns before its WAL is flushed; the question covers it.
$primary->append_conf('postgresql.conf', "wal_writer_delay = '10s'\n");
$primary->reload;
$primary->safe_psql('postgres', 'SET synchronous_commit = off; UPDATE counter SET v = -1');
is( $standby->safe_psql('postgres',
		"SELECT replica_gate.require_lsn('primary', 5000); SELECT v FROM counter"),
	"\n-1", 'a strong read sees an asynchronous commit made just before');
$primary->append_conf('postgresql.conf', "wal_writer_delay = '200ms'\n");
$primary->reload;

# --- an idle primary right after a segment switch -----------------------------
# Its insert position is past the new segment's page header, which replay
# never reports: waiting for it literally would never end.
$primary->safe_psql('postgres', 'UPDATE counter SET v = 2; SELECT pg_switch_wal()');
$primary->wait_for_catchup($standby->name, 'replay');
my $t0 = [gettimeofday];
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('primary', 5000)"),
	't', 'idle primary after a segment switch: a strong read passes');
cmp_ok(tv_interval($t0), '<', 4, 'without waiting out its timeout');
# seen_token() on a primary follows the answer's rules: never past the page
# header a standby cannot report, and flushed, so that a gate on it passes
# even on an idle primary (where the raw insert position, past the new
# segment's header, is never reported by a standby).
my ($seen_ok, $seen) = split /\|/, $primary->safe_psql('postgres',
	"SELECT pg_switch_wal() \\g /dev/null\n"
	  . "SELECT split_part(t, ':', 2)::pg_lsn <= pg_current_wal_flush_lsn(), t "
	  . 'FROM replica_gate.seen_token() t');
is($seen_ok, 't', "idle primary after a segment switch: seen_token() is flushed, not past a page header ($seen)");
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$seen', 5000)"),
	't', 'and a gate on it passes');

# --- shared questions ---------------------------------------------------------
# Freeze the primary's backend that answers the questions: 20 strong reads
# that arrive while one question is in flight share the next one.
$standby->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
my $qpid = $primary->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'replica_gate question'");
like($qpid, qr/^\d+$/, 'the standby keeps one connection to the primary for its questions');
kill 'STOP', $qpid;
my @crowd = map {
	rg_bg_start($standby,
		"SELECT replica_gate.require_lsn('primary', 8000); SELECT v FROM counter", "crowd$_")
} 1 .. 20;
$standby->poll_query_until('postgres',
	"SELECT count(*) = 20 FROM pg_stat_activity WHERE application_name LIKE 'crowd%' AND wait_event_type = 'Extension'")
  or diag('not all 20 strong reads were seen waiting for the answer');
usleep(500_000);
kill 'CONT', $qpid;
rg_bg_finish($_) for @crowd;
is(scalar(grep { $_->{stdout} eq "\n2" } @crowd), 20, '20 concurrent strong reads all see the write');
my ($sr, $q) = split /\|/, $standby->safe_psql('postgres',
	'SELECT strong_reads, questions FROM replica_gate.stats');
is($sr, 20, 'stats: 20 strong reads');
cmp_ok($q, '<=', 3, "they shared questions ($q questions for 20 strong reads)");

# --- primary stopped, then back -----------------------------------------------
$primary->stop('fast');
$t0 = [gettimeofday];
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('primary', 1000); SELECT v FROM counter");
my $elapsed = tv_interval($t0);
like($err, qr/RG001/, 'primary stopped: a strong read raises RG001');
is($out, '', 'and the read did not run');
cmp_ok($elapsed, '<', 3, "within its timeout ($elapsed s for 1 s)");
like($standby->safe_psql('postgres', 'SELECT question FROM replica_gate.status()'),
	qr/^(failed|not opened)$/, 'status() shows the question connection is not open');
$primary->start;
ok( $standby->poll_query_until('postgres',
		"SELECT replica_gate.wait_for_lsn('primary', 1000)"),
	'primary back: strong reads pass again');
is($standby->safe_psql('postgres', 'SELECT question FROM replica_gate.status()'),
	'open', 'status() shows the question connection open');

# --- a cascading standby --------------------------------------------------------
$standby->backup('cascade_base');
my $cascade = PostgreSQL::Test::Cluster->new('cascade');
$cascade->init_from_backup($standby, 'cascade_base', has_streaming => 1);
$cascade->append_conf('postgresql.conf', "recovery_min_apply_delay = 0\n");
$cascade->start;
$primary->safe_psql('postgres', 'UPDATE counter SET v = 3');
$primary->wait_for_catchup($standby->name, 'replay');
$standby->wait_for_catchup($cascade->name, 'replay', $primary->lsn('insert'));
($ret, $out, $err) = $cascade->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('primary', 2000)");
like($err, qr/RG001: could not learn the primary's position/,
	'cascade without replica_gate.primary_conninfo: RG001');
like($err, qr/The server asked is in recovery/, 'the detail says the server asked is a standby');
$cascade->append_conf('postgresql.conf',
	"replica_gate.primary_conninfo = 'host=" . $primary->host . ' port=' . $primary->port . "'\n");
$cascade->reload;
ok( $cascade->poll_query_until('postgres',
		"SELECT replica_gate.wait_for_lsn('primary', 2000)"),
	'cascade with replica_gate.primary_conninfo: strong reads pass');
is($cascade->safe_psql('postgres',
		"SELECT replica_gate.require_lsn('primary', 5000); SELECT v FROM counter"),
	"\n3", 'and see the primary\'s writes');
# several hosts, a standby first: the question asks for the read-write one
$cascade->append_conf('postgresql.conf',
	"replica_gate.primary_conninfo = 'host=" . $standby->host . ',' . $primary->host
	  . ' port=' . $standby->port . ',' . $primary->port . "'\n");
$cascade->reload;
ok( $cascade->poll_query_until('postgres',
		"SELECT replica_gate.wait_for_lsn('primary', 2000)"),
	'several hosts in replica_gate.primary_conninfo, a standby first: strong reads pass');

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');
done_testing();
