/* replica_gate--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.3.0'" to load this file. \quit

-- The statistics count the gates that gave way to replay (gave_way), as the
-- last column so that the 0.2.0 row keeps its shape.
DROP VIEW stats;
DROP FUNCTION stats();

CREATE FUNCTION stats(
	OUT calls bigint,
	OUT immediate bigint,
	OUT waits bigint,
	OUT timeouts bigint,
	OUT errors bigint,
	OUT wait_time double precision,
	OUT max_wait_time double precision,
	OUT waits_le_1ms bigint,
	OUT waits_le_10ms bigint,
	OUT waits_le_100ms bigint,
	OUT waits_le_1s bigint,
	OUT waits_le_10s bigint,
	OUT waits_gt_10s bigint,
	OUT stats_reset timestamptz,
	OUT gave_way bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_stats_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW stats AS SELECT * FROM stats();
GRANT SELECT ON stats TO PUBLIC;

COMMENT ON VIEW stats IS
'cumulative gate statistics of this server since the last stats_reset() (needs shared_preload_libraries)';
