# Two standbys behind one primary, and a cascading standby behind one of
# them: gates and tokens on each; staleness known on the standbys that
# stream from the primary and unknown (NULL, gates fail closed) on the
# cascading one, which hears only from another standby.  That standby cut
# off from the primary: the cascading standby never reports itself fresh.
# The sender is asked once per WAL receiver connection, and asked again
# when the connection changes (a reload) or the timeline does (the sender
# promoted).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(sleep);

# Frequent keepalives, so that staleness stays small on an idle cluster.
my $receiver_conf =
  "wal_receiver_timeout = '1s'\nwal_receiver_status_interval = '1s'\n"
  . "wal_retrieve_retry_interval = '100ms'\nlog_connections = on\n";
my ($primary, $s1) = rg_primary_standby(
	primary_conf => "log_connections = on\n",
	standby_conf => $receiver_conf);
$primary->safe_psql('postgres', 'CREATE TABLE t (v int); INSERT INTO t VALUES (0)');

$primary->backup('s2_base');
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($primary, 's2_base', has_streaming => 1);
$s2->append_conf('postgresql.conf', $receiver_conf);
$s2->start;

$s1->backup('cascade_base');
my $cascade = PostgreSQL::Test::Cluster->new('cascade');
$cascade->init_from_backup($s1, 'cascade_base', has_streaming => 1);
$cascade->append_conf('postgresql.conf', $receiver_conf);
$cascade->start;
$primary->wait_for_catchup($_->name, 'replay') for ($s1, $s2);
$s1->wait_for_catchup($cascade->name, 'replay', $primary->lsn('insert'));

my %standbys = (s1 => $s1, s2 => $s2, cascade => $cascade);

# --- gates and tokens on each standby ---------------------------------------
my $token = $primary->safe_psql('postgres',
	'UPDATE t SET v = 1; SELECT replica_gate.last_commit_token()');
for my $name (sort keys %standbys)
{
	is( $standbys{$name}->safe_psql('postgres',
			"SELECT replica_gate.require_lsn('$token', 2000); SELECT v FROM t"),
		"\n1", "$name: a gate on the write token sees the write");
	is($standbys{$name}->safe_psql('postgres', "SELECT replica_gate.caught_up('$token')"),
		't', "$name: caught_up on the token");
}

# --- staleness: known from the primary, unknown from a standby --------------
# (the first message on a connection may take up to wal_receiver_timeout)
for my $name (qw(s1 s2))
{
	ok( $standbys{$name}->poll_query_until('postgres',
			"SELECT replica_gate.staleness() < '2s'"),
		"$name streams from the primary: staleness is known and small");
}
ok( $cascade->poll_query_until('postgres',
		'SELECT streaming FROM replica_gate.status()'),
	'the cascading standby streams');
is( $cascade->safe_psql('postgres',
		'SELECT replica_gate.staleness() IS NULL, staleness IS NULL FROM replica_gate.status()'),
	't|t', 'cascading standby: staleness is unknown (NULL), in status() too');
my ($ret, $out, $err) = $cascade->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_fresh('1 hour', 200)");
like($err, qr/RG001: replica is not within 01:00:00 of the primary after 200 ms/,
	'cascading standby: require_fresh fails closed, whatever the limit');
like($err, qr/DETAIL:  Its staleness cannot be known: the WAL receiver is not streaming from the primary\./,
	'the detail says why');
is($cascade->safe_psql('postgres', "SELECT replica_gate.fresh_within('1 hour', 100)"),
	'f', 'cascading standby: fresh_within is false');

# One question per WAL receiver connection, for the whole server.
sub questions
{
	my ($node) = @_;
	my @q = slurp_file($node->logfile) =~ /connection authorized: .*application_name=replica_gate/g;
	return scalar(@q);
}
$cascade->safe_psql('postgres', 'SELECT replica_gate.staleness()') for 1 .. 5;
is(questions($s1), 1, 'the cascading standby asked its sender once, for all calls of all sessions');
is(questions($primary), 2, 'the two standbys of the primary asked it once each');

# --- the middle standby cut off from the primary ------------------------------
my $hole = rg_partition($s1);
$s1->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'walreceiver'});
$token = $primary->safe_psql('postgres',
	'UPDATE t SET v = 2; SELECT replica_gate.last_commit_token()');
my ($cascade_fresh, $s1_fresh) = (0, 0);
for (1 .. 20)
{
	sleep 0.1;
	$s1_fresh++ if $s1->safe_psql('postgres', "SELECT replica_gate.fresh_within('1s', 0)") eq 't';
	$cascade_fresh++
	  if $cascade->safe_psql('postgres', "SELECT coalesce(replica_gate.staleness() < '1 hour', false)") eq 't';
}
is($cascade_fresh, 0,
	'middle standby cut off: the cascading standby never reported a staleness bound (20 checks over 2 s)');
ok( $s1->poll_query_until('postgres', "SELECT replica_gate.staleness() IS NULL OR replica_gate.staleness() > '1s'"),
	'the middle standby itself no longer reports itself fresh');
is($cascade->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$token', 300)"),
	'f', 'the cascading standby does not have the write the middle one missed');
close $hole;
$s1->append_conf('postgresql.conf', "primary_conninfo = '" . $primary->connstr . "'");
$s1->reload;
is($cascade->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$token', 10000)"),
	't', 'healed: the write arrives through the middle standby');

# --- a new connection and a new timeline are asked again ---------------------
# Re-pointed at the other standby by a reload (the WAL receiver restarts;
# shared memory stays): still a standby, asked once.
$cascade->append_conf('postgresql.conf', "primary_conninfo = '" . $s2->connstr . "'");
$cascade->reload;
ok( $cascade->poll_query_until('postgres',
		"SELECT sender_port = " . $s2->port . " AND status = 'streaming' FROM pg_stat_wal_receiver"),
	'reloaded: the cascading standby streams from the other standby');
my $known = 0;
for (1 .. 10)
{
	sleep 0.1;
	$known++ if $cascade->safe_psql('postgres', 'SELECT replica_gate.staleness() IS NOT NULL') eq 't';
}
is($known, 0, 'streaming from the other standby: staleness unknown in 10 checks over 1 s');
is(questions($s2), 1, 'the new sender was asked once');

# That standby promoted: the cascading standby follows it onto its new
# timeline and asks again; its sender is now a primary.
$s2->promote;
$s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'no promotion';
$s2->safe_psql('postgres', 'CREATE TABLE after_promotion (v int)');
ok( $cascade->poll_query_until('postgres', "SELECT replica_gate.staleness() < '2s'"),
	'its sender promoted: the former cascading standby knows its staleness');
is(questions($s2), 2, 'it asked its sender again for the new timeline');
is( $cascade->safe_psql('postgres',
		"SELECT replica_gate.require_lsn('"
		  . $s2->safe_psql('postgres', 'INSERT INTO after_promotion VALUES (1); SELECT replica_gate.last_commit_token()')
		  . "', 2000); SELECT count(*) FROM after_promotion"),
	"\n1", 'and gates on the new primary\'s tokens');

$_->stop for ($cascade, $s2, $s1, $primary);
done_testing();
