-- Upgrade path: the oldest install script, then every ALTER EXTENSION
-- UPDATE step to the default version, must give the same objects as a
-- fresh install.
DROP EXTENSION replica_gate;
CREATE EXTENSION replica_gate VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'replica_gate';
-- The new library serves the old definitions until the update.
SELECT replica_gate.caught_up(pg_current_wal_insert_lsn()),
       replica_gate.wait_for_lsn(pg_current_wal_insert_lsn(), 0),
       replica_gate.require_lsn(pg_current_wal_insert_lsn(), 0);
ALTER EXTENSION replica_gate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'replica_gate';

-- What the update made, to compare with the fresh install below.
CREATE TEMP TABLE updated AS
SELECT p.oid::regprocedure::text AS func, pg_get_function_arguments(p.oid) AS args,
       obj_description(p.oid, 'pg_proc') AS comment, p.proacl::text AS acl
  FROM pg_proc p WHERE p.pronamespace = 'replica_gate'::regnamespace;
SELECT func FROM updated ORDER BY func COLLATE "C";

DROP EXTENSION replica_gate;
CREATE EXTENSION replica_gate;
SELECT count(*) AS differences FROM (
	(SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid),
	        obj_description(p.oid, 'pg_proc'), p.proacl::text
	   FROM pg_proc p WHERE p.pronamespace = 'replica_gate'::regnamespace
	 EXCEPT SELECT * FROM updated)
	UNION ALL
	(SELECT * FROM updated
	 EXCEPT SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid),
	        obj_description(p.oid, 'pg_proc'), p.proacl::text
	   FROM pg_proc p WHERE p.pronamespace = 'replica_gate'::regnamespace)) d;

-- The statistics view gained its gave_way column (0.3.0), then its question
-- counters (0.4.0), at the end.
SELECT attnum, attname FROM pg_attribute
 WHERE attrelid = 'replica_gate.stats'::regclass AND attnum >= 14 ORDER BY attnum;

-- The gates with their new mode argument work after the update.
SELECT replica_gate.caught_up(pg_current_wal_insert_lsn(), 'flush');

-- DROP EXTENSION leaves the schema the control file names, empty: PostgreSQL
-- creates it for CREATE EXTENSION but does not make it part of the
-- extension (README, Installation).  DROP SCHEMA removes it.
DROP EXTENSION replica_gate;
SELECT count(*) AS objects_left FROM pg_depend
 WHERE refobjid = 'replica_gate'::regnamespace;
DROP SCHEMA replica_gate;
CREATE EXTENSION replica_gate;
