/*-------------------------------------------------------------------------
 *
 * upstream.c
 *		Is the server this standby streams from the primary, or another
 *		standby?
 *
 * staleness() dates this node's data by the send time and WAL end of the
 * last message its WAL receiver got.  On a cascading standby that message
 * comes from another standby: it says how far this node is behind that
 * standby, which may itself have been cut off from the primary for
 * minutes.  Nothing in the streaming protocol says what the sender is, so
 * this module asks it: once per WAL receiver connection, over a
 * replication connection of its own, made with primary_conninfo to the
 * host and port the WAL receiver is connected to.  "SHOW in_hot_standby"
 * answers on 14 and later; a 13 sender answers "SHOW transaction_read_only"
 * (on in recovery; also on a primary with default_transaction_read_only,
 * which then counts as a standby: the safe side).
 *
 * The answer holds for the life of the WAL receiver's connection: a primary
 * becomes a standby only through a restart, which ends the connection, and
 * a standby that is promoted ends the connections of its cascaded
 * standbys.  It is kept in shared memory when the library is preloaded (one
 * question per connection for the whole server), else in the session.
 * Until an answer is known, and when the question fails (retried after
 * RG_UPSTREAM_RETRY_MS), the sender counts as a standby: staleness is
 * unknown, and gates on it fail closed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "replication/walreceiver.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "replica_gate.h"

/* How long to wait before asking again after a failed question. */
#define RG_UPSTREAM_RETRY_MS		1000
/* Time limits of the question's connection, in seconds. */
#define RG_UPSTREAM_TIMEOUT_S		2

typedef enum RgUpstreamState
{
	RG_UPSTREAM_UNKNOWN,		/* not asked yet, or the question failed */
	RG_UPSTREAM_ASKING,			/* a backend is asking */
	RG_UPSTREAM_PRIMARY,
	RG_UPSTREAM_STANDBY
} RgUpstreamState;

/* The answer for one WAL receiver connection (pid and start time). */
typedef struct RgUpstream
{
	slock_t		mutex;
	pid_t		pid;
	pg_time_t	started;
	RgUpstreamState state;
	TimestampTz retry_after;	/* when UNKNOWN after a failure */
} RgUpstream;

static RgUpstream *rg_upstream_shared = NULL;
static RgUpstream rg_upstream_session;
static RgUpstream *rg_upstream = NULL;

Size
rg_upstream_shmem_size(void)
{
	return sizeof(RgUpstream);
}

/*
 * rg_upstream_shmem_init
 *		Create or attach to the shared answer; called with
 *		AddinShmemInitLock held.
 */
void
rg_upstream_shmem_init(void)
{
	bool		found;

	rg_upstream_shared = ShmemInitStruct("replica_gate upstream",
										 sizeof(RgUpstream), &found);
	if (!found)
	{
		memset(rg_upstream_shared, 0, sizeof(RgUpstream));
		SpinLockInit(&rg_upstream_shared->mutex);
	}
}

/* The answer's home: shared memory if preloaded, else this session. */
static RgUpstream *
rg_upstream_cache(void)
{
	if (rg_upstream == NULL)
	{
		if (rg_upstream_shared != NULL)
			rg_upstream = rg_upstream_shared;
		else
		{
			SpinLockInit(&rg_upstream_session.mutex);
			rg_upstream = &rg_upstream_session;
		}
	}
	return rg_upstream;
}

/* Append a conninfo value, quoted. */
static void
rg_upstream_append_value(StringInfo buf, const char *value)
{
	appendStringInfoChar(buf, '\'');
	for (const char *p = value; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * rg_upstream_show
 *		Run a SHOW of a boolean setting over the question's connection:
 *		"on" means a standby.
 */
static RgUpstreamState
rg_upstream_show(WalReceiverConn *conn, const char *query)
{
	Oid			types[1] = {TEXTOID};
	WalRcvExecResult *res;
	RgUpstreamState state = RG_UPSTREAM_UNKNOWN;

	res = walrcv_exec(conn, query, 1, types);
	if (res->status != WALRCV_OK_TUPLES)
		ereport(LOG,
				(errmsg("replica_gate could not ask the WAL sender whether it is a standby: %s",
						res->err ? res->err : "no result")));
	else
	{
		TupleTableSlot *slot = MakeSingleTupleTableSlot(res->tupledesc,
														&TTSOpsMinimalTuple);

		if (tuplestore_gettupleslot(res->tuplestore, true, false, slot))
		{
			bool		isnull;
			Datum		value = slot_getattr(slot, 1, &isnull);

			if (!isnull)
				state = strcmp(TextDatumGetCString(value), "on") == 0 ?
					RG_UPSTREAM_STANDBY : RG_UPSTREAM_PRIMARY;
		}
		ExecDropSingleTupleTableSlot(slot);
	}
	walrcv_clear_result(res);
	return state;
}

/*
 * rg_upstream_ask
 *		Connect to the sender at host:port with primary_conninfo's other
 *		options and ask whether it is in recovery.
 */
static RgUpstreamState
rg_upstream_ask(const char *host, int port)
{
	StringInfoData conninfo;
	WalReceiverConn *conn;
	char	   *err = NULL;
	volatile RgUpstreamState state = RG_UPSTREAM_UNKNOWN;

	load_file("libpqwalreceiver", false);

	/*
	 * Later keywords win: the sender's own host and port, a name the
	 * sender's administrator can recognize, and time limits for connecting
	 * and, over TCP, for a sender that stops answering.
	 */
	initStringInfo(&conninfo);
	appendStringInfo(&conninfo, "%s host=", PrimaryConnInfo ? PrimaryConnInfo : "");
	rg_upstream_append_value(&conninfo, host);
	appendStringInfo(&conninfo,
					 " port=%d application_name=replica_gate connect_timeout=%d tcp_user_timeout=%d",
					 port, RG_UPSTREAM_TIMEOUT_S, RG_UPSTREAM_TIMEOUT_S * 1000);
	conn = RG_WALRCV_CONNECT(conninfo.data, "replica_gate", &err);
	pfree(conninfo.data);
	if (conn == NULL)
	{
		ereport(LOG,
				(errmsg("replica_gate could not connect to the WAL sender to ask whether it is a standby: %s",
						err ? err : "unknown error")));
		return RG_UPSTREAM_UNKNOWN;
	}

	PG_TRY();
	{
		state = rg_upstream_show(conn,
								 walrcv_server_version(conn) >= 140000 ?
								 "SHOW in_hot_standby" :
								 "SHOW transaction_read_only");
	}
	PG_FINALLY();
	{
		walrcv_disconnect(conn);
	}
	PG_END_TRY();
	return state;
}

/* Make a cache that still says ASKING for our question UNKNOWN again. */
static void
rg_upstream_abandon(int code, Datum arg)
{
	RgUpstream *cache = rg_upstream_cache();
	RgUpstream *asked = (RgUpstream *) DatumGetPointer(arg);

	SpinLockAcquire(&cache->mutex);
	if (cache->pid == asked->pid && cache->started == asked->started &&
		cache->state == RG_UPSTREAM_ASKING)
		cache->state = RG_UPSTREAM_UNKNOWN;
	SpinLockRelease(&cache->mutex);
}

/*
 * rg_upstream_is_primary
 *		Is the WAL receiver connection of process pid, started at started,
 *		connected to host:port, connected to a primary?  Asks the sender the
 *		first time for each connection; false until it knows.
 */
bool
rg_upstream_is_primary(pid_t pid, pg_time_t started, const char *host, int port)
{
	RgUpstream *cache = rg_upstream_cache();
	RgUpstream	asked;
	RgUpstreamState state;
	TimestampTz now = GetCurrentTimestamp();
	bool		ask;

	if (host[0] == '\0')
		return false;

	SpinLockAcquire(&cache->mutex);
	if (cache->pid != pid || cache->started != started)
	{
		cache->pid = pid;
		cache->started = started;
		cache->state = RG_UPSTREAM_UNKNOWN;
		cache->retry_after = 0;
	}
	state = cache->state;
	ask = (state == RG_UPSTREAM_UNKNOWN && now >= cache->retry_after);
	if (ask)
		cache->state = RG_UPSTREAM_ASKING;
	SpinLockRelease(&cache->mutex);

	if (!ask)
		return state == RG_UPSTREAM_PRIMARY;

	asked.pid = pid;
	asked.started = started;
	PG_ENSURE_ERROR_CLEANUP(rg_upstream_abandon, PointerGetDatum(&asked));
	{
		state = rg_upstream_ask(host, port);
	}
	PG_END_ENSURE_ERROR_CLEANUP(rg_upstream_abandon, PointerGetDatum(&asked));

	SpinLockAcquire(&cache->mutex);
	if (cache->pid == pid && cache->started == started)
	{
		cache->state = state;
		if (state == RG_UPSTREAM_UNKNOWN)
			cache->retry_after =
				TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RG_UPSTREAM_RETRY_MS);
	}
	SpinLockRelease(&cache->mutex);
	return state == RG_UPSTREAM_PRIMARY;
}
