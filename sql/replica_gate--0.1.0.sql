/* replica_gate--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION replica_gate" to load this file. \quit

-- The gates are for every application role.
GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;

CREATE FUNCTION caught_up(target pg_lsn)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(pg_lsn) IS
'true when this server has replayed (standby) or written (primary) the target LSN; NULL target: true';

CREATE FUNCTION wait_for_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(pg_lsn, integer) IS
'wait until caught_up(target), at most timeout_ms (NULL: replica_gate.default_timeout); false on timeout';

CREATE FUNCTION require_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(pg_lsn, integer) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';

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
'end of the commit record of this session''s last write transaction (the write token); NULL before the first';

CREATE FUNCTION seen_lsn()
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'rg_seen_lsn'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION seen_lsn() IS
'an LSN covering everything this session''s reads on this node could have seen (the read token, for monotonic reads)';
