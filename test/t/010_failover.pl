# Failover-safe tokens: a write the old primary committed after the point
# where the new primary's timeline branched off is reported as lost (RG002)
# by every form of the gate, on the new primary, on a fresh standby of it
# and on a cascading standby, and at once on a standby that was waiting when
# it followed the new timeline.  Tokens from before the failover and from
# the new timeline pass; a standby still on the old timeline waits for a
# new-timeline token until it follows.  A plain LSN stays timeline-blind.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval);

my ($old, $s1) = rg_primary_standby(name => 'old');

# s1 keeps the WAL that s2 will need to follow it across the base backups
# taken from it (wal_keep_segments before 13.0).
$s1->append_conf('postgresql.conf',
	$s1->safe_psql('postgres', "SELECT count(*) FROM pg_settings WHERE name = 'wal_keep_size'")
	? "wal_keep_size = '256MB'"
	: 'wal_keep_segments = 16');
$s1->reload;
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($old, 'base', has_streaming => 1);
$s2->start;

$old->safe_psql('postgres',
	"CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'before')");
my $before = $old->safe_psql('postgres',
	"UPDATE t SET v = 'before' WHERE id = 1; SELECT replica_gate.last_commit_token()");
$old->wait_for_catchup($_->name, 'replay') for ($s1, $s2);
like($before, qr/^1:[0-9A-F]+\/[0-9A-F]+$/, "write token carries timeline 1 ($before)");

# Cut both standbys off the old primary (s2 first, so that s1, which will
# be promoted, has at least all that s2 has).
foreach my $s ($s2, $s1)
{
	$s->append_conf('postgresql.conf', "primary_conninfo = ''");
	$s->reload;
	$s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
	  or die 'the walreceiver did not stop';
}

# The write that only the old primary ever had.
my $lost = $old->safe_psql('postgres',
	"INSERT INTO t VALUES (2, 'lost'); SELECT replica_gate.last_commit_token()");
my ($lost_lsn) = $lost =~ /^1:(.*)$/;
$old->stop('immediate');

# s1 becomes the new primary on timeline 2, and writes past the lost LSN.
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion failed';
my $new = $s1->safe_psql('postgres',
	"INSERT INTO t VALUES (3, 'new'); SELECT replica_gate.last_commit_token()");
like($new, qr/^2:/, "a write on the new primary has a timeline 2 token ($new)");
$s1->safe_psql('postgres', 'CREATE TABLE filler (g int)');
$s1->safe_psql('postgres', 'INSERT INTO filler SELECT generate_series(1, 10000)')
  while $s1->safe_psql('postgres', "SELECT pg_current_wal_lsn() <= '$lost_lsn'") eq 't';

# Every form of the gate on $node reports the lost write as lost, at once.
sub lost_everywhere
{
	my ($node, $where) = @_;
	foreach my $gate (
		"SELECT replica_gate.caught_up('$lost')",
		"SELECT replica_gate.wait_for_lsn('$lost', 30000)",
		"SELECT replica_gate.require_lsn('$lost', 30000)",
		"SELECT replica_gate.caught_up('$lost', 'flush')",
		"SET replica_gate.default_timeout = 30000; SET replica_gate.require_lsn = '$lost'",
		"SET replica_gate.default_timeout = 30000; SET replica_gate.read_after = '$lost'; SELECT v FROM t WHERE id = 1")
	{
		my $t0 = [gettimeofday];
		my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$gate");
		my $took = tv_interval($t0);
		like($err, qr/RG002: write of token \Q$lost\E was lost in a failover/,
			"$where: lost write reported by: $gate");
		cmp_ok($took, '<', 5, "$where: at once, not after the timeout (${took}s)");
	}
}

# --- the new primary ----------------------------------------------------------
lost_everywhere($s1, 'new primary');
my ($ret, $out, $err) = $s1->psql('postgres',
	"SELECT replica_gate.caught_up('$lost')");
like($err,
	qr/DETAIL:  In the history of this server, timeline 1 ended at [0-9A-F]+\/[0-9A-F]+, before the write; timeline 2 does not contain it\./,
	'the detail names the switch point');
is($s1->safe_psql('postgres', "SELECT replica_gate.caught_up('$lost_lsn'::pg_lsn)"),
	't', 'the same write as a plain LSN looks caught up: plain LSNs are timeline-blind');
is( $s1->safe_psql('postgres',
		"SELECT replica_gate.caught_up('$before'), replica_gate.caught_up('$new')"),
	't|t', 'new primary: tokens from before the failover and from timeline 2 pass');
is($s1->safe_psql('postgres', 'SELECT v FROM t ORDER BY id'),
	"before\nnew", 'and indeed the new primary has no trace of the lost write');

# --- a fresh standby of the new primary, and a cascading standby of that --------
$s1->backup('b3');
my $s3 = PostgreSQL::Test::Cluster->new('s3');
$s3->init_from_backup($s1, 'b3', has_streaming => 1);
$s3->start;
$s3->backup('b4');
my $s4 = PostgreSQL::Test::Cluster->new('s4');
$s4->init_from_backup($s3, 'b4', has_streaming => 1);
$s4->start;
my $newest = $s1->safe_psql('postgres',
	"UPDATE t SET v = 'newest' WHERE id = 3; SELECT replica_gate.last_commit_token()");
foreach my $s ([ $s3, 'standby of the new primary' ], [ $s4, 'cascading standby' ])
{
	my ($node, $where) = @$s;
	is( $node->safe_psql('postgres',
			"SELECT replica_gate.require_lsn('$newest', 30000); SELECT v FROM t WHERE id = 3"),
		"\nnewest", "$where: a timeline 2 token gates the read");
	is($node->safe_psql('postgres', "SELECT replica_gate.caught_up('$before')"),
		't', "$where: a token from before the failover passes");
	lost_everywhere($node, $where);
}

# --- a standby still on the old timeline --------------------------------------
is($s2->safe_psql('postgres', "SELECT replica_gate.caught_up('$before')"),
	't', 'old-timeline standby: a token from before the failover passes');
is($s2->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$new', 200)"),
	'f', 'old-timeline standby: a timeline 2 token is not reached (it may be later)');
($ret, $out, $err) = $s2->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('$new', 100)");
like($err, qr/RG001: timed out after 100 ms waiting for target \Q$new\E to be replayed/,
	'old-timeline standby: require_lsn times out with RG001');

# Two sessions wait on s2, then s2 follows the new primary: the timeline 2
# token is reached, the lost one is reported lost as soon as s2 is on
# timeline 2.
my $wait_new = rg_bg_start($s2,
	"SELECT replica_gate.require_lsn('$newest', 60000); SELECT v FROM t WHERE id = 3",
	'wait_new');
my $wait_lost = rg_bg_start($s2,
	"SELECT replica_gate.wait_for_lsn('$lost', 60000)", 'wait_lost');
rg_pid_of($s2, 'wait_new');
rg_pid_of($s2, 'wait_lost');
$s2->append_conf('postgresql.conf',
	"primary_conninfo = '" . $s1->connstr . "'");
$s2->reload;
rg_bg_finish($wait_new);
is($wait_new->{stdout}, "\nnewest",
	'the wait for a timeline 2 token ends when the standby follows timeline 2')
  or diag($wait_new->{stderr});
rg_bg_finish($wait_lost);
like($wait_lost->{stderr}, qr/RG002: write of token \Q$lost\E was lost in a failover/,
	'a wait for the lost write ends with RG002 once the standby follows timeline 2');
cmp_ok($wait_lost->{elapsed}, '<', 30, "well before its timeout ($wait_lost->{elapsed}s)");
is($s2->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');

$_->stop for ($s4, $s3, $s2, $s1);
done_testing();
