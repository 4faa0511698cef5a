# Strong reads across a failover: a primary and two standbys; the primary
# stops, one standby is promoted and the other is pointed at it (its
# primary_conninfo changed and reloaded, as Patroni does).  Strong reads on
# the remaining standby fail closed while it has no primary, then follow the
# new one: its question connection moves there, and they see the new
# primary's writes.  A strong read waiting for a position of the old primary
# that the failover lost fails with RG001 (it carried no write of its own
# that could be "lost"), at once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $s1) = rg_primary_standby(primary_conf => "autovacuum = off\n");
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($primary, 'base', has_streaming => 1);
$s2->start;
$primary->safe_psql('postgres',
	'CREATE TABLE counter (v int); INSERT INTO counter VALUES (1)');
$primary->wait_for_catchup($_->name, 'replay') for ($s1, $s2);

is($s2->safe_psql('postgres', "SET replica_gate.consistency = strong; SELECT v FROM counter"),
	'1', 'before: a strong read on the second standby');
my $old_tli = $s2->safe_psql('postgres', 'SELECT split_part(replica_gate.primary_token(), \':\', 1)');

# --- a position lost in the failover -----------------------------------------------
# Both standbys stop receiving (the second first, so that it has no WAL the
# first lacks and can follow it), the primary writes on, and a strong read
# on the second standby, which still reaches the primary for its question,
# waits for a position the failover below loses.
my $s2_hole = rg_partition($s2);
my $s1_hole = rg_partition($s1);
$s2->append_conf('postgresql.conf',
	"replica_gate.primary_conninfo = '" . $primary->connstr . "'\n");
$s2->reload;
$primary->safe_psql('postgres', 'UPDATE counter SET v = 9');
$s2->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
my $lost_read = rg_bg_start($s2,
	"SET replica_gate.consistency = strong; SET replica_gate.default_timeout = '60s'; SELECT v FROM counter",
	'lost_reader');
$s2->poll_query_until('postgres', 'SELECT questions > questions_failed FROM replica_gate.stats')
  or die 'the strong read got no answer';

# --- the primary goes away ------------------------------------------------------
$primary->stop('immediate');
# (the holes closed: a WAL receiver hanging in its connection attempt can
# keep a promotion waiting)
close $_ for ($s1_hole, $s2_hole);
my ($ret, $out, $err) = $s2->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.consistency = strong; SET replica_gate.default_timeout = '1s'; SELECT v FROM counter");
like($err, qr/RG001/, 'no primary: a strong read fails closed (RG001)');
is($out, '', 'and returns no row');

# --- s1 is promoted, s2 follows it ------------------------------------------------
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's1 was not promoted';
$s1->safe_psql('postgres', 'UPDATE counter SET v = 2');
$s2->append_conf('postgresql.conf',
	"primary_conninfo = '" . $s1->connstr . "'\nreplica_gate.primary_conninfo = ''\n");
$s2->reload;
rg_bg_finish($lost_read);
like($lost_read->{stderr}, qr/RG001: the primary's position \S+ is not in the history of this server/,
	'a strong read waiting for a position the failover lost: RG001')
  or diag($lost_read->{stderr});
is($lost_read->{stdout}, '', 'and no row');
cmp_ok($lost_read->{elapsed}, '<', 40, "at once, not after its timeout ($lost_read->{elapsed} s)");
my $seen = '';
foreach (1 .. 100)
{
	($ret, $seen, $err) = $s2->psql('postgres',
		"SET replica_gate.default_timeout = '1s'; SET replica_gate.consistency = strong; SELECT v FROM counter");
	last if $seen eq '2';
	sleep 1;
}
is($seen, '2', 'after: strong reads on the second standby follow the new primary and see its write');
my $new_tli = $s2->safe_psql('postgres', 'SELECT split_part(replica_gate.primary_token(), \':\', 1)');
cmp_ok($new_tli, '>', $old_tli, "the answer carries the new primary's timeline ($old_tli -> $new_tli)");
$s1->safe_psql('postgres', 'UPDATE counter SET v = 3');
is($s2->safe_psql('postgres', "SET replica_gate.consistency = strong; SELECT v FROM counter"),
	'3', 'and keep seeing its writes');
like( $s1->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'replica_gate question'"),
	qr/^1$/, 'the question connection moved to the new primary');
done_testing();
