/* replica_gate--0.3.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION replica_gate" to load this file. \quit

-- The gates are for every application role.
GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;

CREATE FUNCTION caught_up(target pg_lsn, mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(pg_lsn, text) IS
'true when this server has replayed (standby; or written, flushed: see mode) or written (primary) the target LSN; NULL target: true';

CREATE FUNCTION wait_for_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL,
							 mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(pg_lsn, integer, text) IS
'wait until caught_up(target, mode), at most timeout_ms (NULL: replica_gate.default_timeout); false on timeout';

CREATE FUNCTION require_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL,
							mode text DEFAULT 'replay')
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(pg_lsn, integer, text) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';

CREATE FUNCTION caught_up(target text, mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(text, text) IS
'caught_up for a token ''<timeline>:<lsn>'' (checked against this server''s timeline history: SQLSTATE RG002 if the write was lost in a failover) or a plain LSN given as text';

CREATE FUNCTION wait_for_lsn(target text, timeout_ms integer DEFAULT NULL,
							 mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(text, integer, text) IS
'wait_for_lsn for a token or a plain LSN given as text';

CREATE FUNCTION require_lsn(target text, timeout_ms integer DEFAULT NULL,
							mode text DEFAULT 'replay')
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(text, integer, text) IS
'require_lsn for a token or a plain LSN given as text';

CREATE FUNCTION waiters()
RETURNS integer
AS 'MODULE_PATHNAME', 'rg_waiters'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION waiters() IS
'number of backends sleeping in a gate on this server (always 0 without shared_preload_libraries)';

CREATE FUNCTION last_commit_lsn()
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'rg_last_commit_lsn'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION last_commit_lsn() IS
'end of the commit record of this session''s last write transaction (the write token as a plain, timeline-blind LSN); NULL before the first';

CREATE FUNCTION seen_lsn()
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'rg_seen_lsn'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION seen_lsn() IS
'an LSN covering everything this session''s reads on this node could have seen (the read token as a plain, timeline-blind LSN)';

CREATE FUNCTION last_commit_token()
RETURNS text
AS 'MODULE_PATHNAME', 'rg_last_commit_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION last_commit_token() IS
'the write token ''<timeline>:<lsn>'': timeline and end of the commit record of this session''s last write transaction; NULL before the first';

CREATE FUNCTION seen_token()
RETURNS text
AS 'MODULE_PATHNAME', 'rg_seen_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION seen_token() IS
'the read token ''<timeline>:<lsn>'': covers everything this session''s reads on this node could have seen';

CREATE FUNCTION staleness()
RETURNS interval
AS 'MODULE_PATHNAME', 'rg_staleness_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION staleness() IS
'upper bound on how far this node''s data is behind the primary: 0 on a primary, NULL when it cannot be known';

CREATE FUNCTION fresh_within(max_staleness interval, timeout_ms integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_fresh_within'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION fresh_within(interval, integer) IS
'wait until staleness() <= max_staleness, at most timeout_ms; false on timeout';

CREATE FUNCTION require_fresh(max_staleness interval, timeout_ms integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_fresh'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_fresh(interval, integer) IS
'wait like fresh_within, but raise SQLSTATE RG001 on timeout';

CREATE FUNCTION status(
	OUT role text,
	OUT replay_lsn pg_lsn,
	OUT receive_lsn pg_lsn,
	OUT insert_lsn pg_lsn,
	OUT flush_lsn pg_lsn,
	OUT timeline integer,
	OUT replay_paused boolean,
	OUT streaming boolean,
	OUT staleness interval,
	OUT waiters integer,
	OUT preloaded boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION status() IS
'what this node can serve, in one row: role, WAL positions, timeline, replay and receiver state, staleness bound, waiting gates, whether the library is preloaded here';

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

CREATE FUNCTION stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'rg_stats_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION stats_reset() IS
'zero the counters of replica_gate.stats (superusers, and roles granted EXECUTE)';

REVOKE ALL ON FUNCTION stats_reset() FROM PUBLIC;
