/* replica_gate--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.5.0'" to load this file. \quit

-- Strong reads without a round trip: a standby's question worker compares
-- the rate of the clock the primary's commit wait runs on with its own.
CREATE FUNCTION commit_clock()
RETURNS bigint
AS 'MODULE_PATHNAME', 'rg_commit_clock'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION commit_clock() IS
'the clock this server''s commit wait runs on, in microseconds from an arbitrary origin (CLOCK_BOOTTIME on Linux): a standby compares its rate with its own clock''s';
