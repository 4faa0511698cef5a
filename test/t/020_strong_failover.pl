# Strong reads across a failover: a primary and two standbys; the primary
# stops, one standby is promoted and the other is pointed at it (its
# primary_conninfo changed and reloaded, as Patroni does).  Strong reads on
# the remaining standby fail closed while it has no primary, then follow the
# new one: its question connection moves there, and they see the new
# primary's writes.

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

# --- the primary goes away ------------------------------------------------------
$primary->stop('immediate');
my ($ret, $out, $err) = $s2->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.consistency = strong; SET replica_gate.default_timeout = '1s'; SELECT v FROM counter");
like($err, qr/RG001/, 'no primary: a strong read fails closed (RG001)');
is($out, '', 'and returns no row');

# --- s1 is promoted, s2 follows it ------------------------------------------------
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's1 was not promoted';
$s1->safe_psql('postgres', 'UPDATE counter SET v = 2');
$s2->append_conf('postgresql.conf', "primary_conninfo = '" . $s1->connstr . "'\n");
$s2->reload;
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
