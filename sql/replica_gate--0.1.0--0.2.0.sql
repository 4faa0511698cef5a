/* replica_gate--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.2.0'" to load this file. \quit

-- The LSN gates gain a wait mode: 'replay' (as before), 'write' or 'flush'.
DROP FUNCTION caught_up(pg_lsn);
DROP FUNCTION wait_for_lsn(pg_lsn, integer);
DROP FUNCTION require_lsn(pg_lsn, integer);

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
