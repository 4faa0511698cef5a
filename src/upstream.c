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
 * this module asks it, once per WAL receiver connection and timeline, over
 * a replication connection of its own: primary_conninfo's options with the
 * host and port the WAL receiver reports (pg_stat_wal_receiver's
 * sender_host and sender_port).  From 14 on the sender's answer is the
 * in_hot_standby parameter it reports when the connection starts; a 13
 * sender answers "SHOW transaction_read_only" (on in recovery; also on a
 * primary with default_transaction_read_only, which then counts as a
 * standby: the safe side).  A primary also answers "SHOW wal_writer_delay":
 * a commit made with synchronous_commit = off is visible there before its
 * WAL is flushed, and so before it is sent, for up to three times that
 * (the WAL writer's promise); staleness.c widens its bound by as much.  A
 * reload of the primary that raises wal_writer_delay counts from the WAL
 * receiver's next connection.
 *
 * The answer lives in shared memory, so the sender sees one such
 * connection per WAL receiver connection, not one per session; without
 * shared_preload_libraries nothing is asked and the sender counts as a
 * standby.  A new WAL receiver process, a new start of streaming and a new
 * timeline each ask again: a standby promoted while we stream from it
 * moves us to its new timeline.  Messages sent before the answer count for
 * nothing, since the sender may have been a standby when it sent them.
 * Until an answer is known, while the question runs, and when it fails
 * (logged once per connection, retried after RG_UPSTREAM_RETRY_MS), the
 * sender counts as a standby: staleness is unknown, and gates on it fail
 * closed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "replication/walreceiver.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "remote.h"
#include "upstream.h"

/* How long the question may take, and how long to wait after a failure. */
#define RG_UPSTREAM_TIMEOUT_MS		2000
#define RG_UPSTREAM_RETRY_MS		1000

typedef enum RgUpstreamState
{
	RG_UPSTREAM_UNKNOWN,		/* not asked yet, or the question failed */
	RG_UPSTREAM_ASKING,			/* a backend is asking */
	RG_UPSTREAM_PRIMARY,
	RG_UPSTREAM_STANDBY
} RgUpstreamState;

/* The answer for one WAL receiver connection and timeline. */
typedef struct RgUpstream
{
	slock_t		mutex;
	RgUpstreamKey key;
	RgUpstreamState state;
	TimestampTz answered_at;	/* when the sender answered */
	int64		unflushed_us;	/* a primary's 3 * wal_writer_delay */
	TimestampTz retry_after;	/* UNKNOWN after a failure: not before then */
	bool		failed_once;	/* a failure was logged for this key */
} RgUpstream;

static RgUpstream *rg_upstream = NULL;
static uint32 rg_upstream_event = 0;

/* Connection options that the question sets itself. */
static const char *const rg_upstream_overridden[] = {
	"host", "hostaddr", "port", "dbname", "replication", "application_name",
	"load_balance_hosts", "target_session_attrs"
};

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

	rg_upstream = ShmemInitStruct("replica_gate upstream", sizeof(RgUpstream),
								  &found);
	if (!found)
	{
		memset(rg_upstream, 0, sizeof(RgUpstream));
		SpinLockInit(&rg_upstream->mutex);
	}
}

static bool
rg_upstream_same_key(const RgUpstreamKey *a, const RgUpstreamKey *b)
{
	return a->pid == b->pid && a->started == b->started && a->tli == b->tli;
}

/*
 * rg_upstream_show
 *		The value of setting "name" on a connected sender (palloc'd), or
 *		NULL if it does not answer in time.
 */
static char *
rg_upstream_show(PGconn *conn, const char *name, TimestampTz deadline)
{
	char		query[64];
	PGresult   *res;
	char	   *value = NULL;

	snprintf(query, sizeof(query), "SHOW %s", name);
	res = rg_remote_query(conn, query, deadline,
						  RG_WAIT_EVENT(rg_upstream_event, "ReplicaGateUpstream"));
	if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK &&
		PQntuples(res) == 1)
		value = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/*
 * rg_upstream_answer
 *		Ask a connected sender whether it is in recovery, and a primary how
 *		long a commit may stay unflushed there (*unflushed_us).
 */
static RgUpstreamState
rg_upstream_answer(PGconn *conn, TimestampTz deadline, int64 *unflushed_us)
{
	const char *on;
	char	   *delay;
	int			delay_ms;

#if PG_VERSION_NUM >= 140000
	on = PQparameterStatus(conn, "in_hot_standby");
#else
	on = rg_upstream_show(conn, "transaction_read_only", deadline);
#endif
	if (on != NULL && strcmp(on, "on") == 0)
		return RG_UPSTREAM_STANDBY;
	if (on == NULL || strcmp(on, "off") != 0)
		return RG_UPSTREAM_UNKNOWN;

	delay = rg_upstream_show(conn, "wal_writer_delay", deadline);
	if (delay == NULL || !parse_int(delay, &delay_ms, GUC_UNIT_MS, NULL))
		return RG_UPSTREAM_UNKNOWN;
	*unflushed_us = 3 * (int64) delay_ms * 1000;
	return RG_UPSTREAM_PRIMARY;
}

/*
 * rg_upstream_ask
 *		Connect to the sender at host:port and ask whether it is a standby,
 *		within RG_UPSTREAM_TIMEOUT_MS; UNKNOWN if that fails (logged if
 *		log_failure).  A primary's *unflushed_us is set.
 *
 * The connection takes primary_conninfo's options (URI or keyword form)
 * with the sender's host and port: a physical replication connection named
 * replica_gate.
 */
static RgUpstreamState
rg_upstream_ask(const char *host, int port, bool log_failure,
				int64 *unflushed_us)
{
	RgRemoteOptions options = {0};
	PGconn	   *volatile conn = NULL;
	volatile RgUpstreamState state = RG_UPSTREAM_UNKNOWN;
	char	   *error = "primary_conninfo cannot be parsed";
	char		port_text[16];
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   RG_UPSTREAM_TIMEOUT_MS);

	snprintf(port_text, sizeof(port_text), "%d", port);
	if (rg_remote_add_conninfo(&options, PrimaryConnInfo))
	{
		for (int i = 0; i < lengthof(rg_upstream_overridden); i++)
			rg_remote_set(&options, rg_upstream_overridden[i], NULL);
		rg_remote_set(&options, "host", host);
		rg_remote_set(&options, "port", port_text);
		rg_remote_set(&options, "dbname", "replication");
		rg_remote_set(&options, "replication", "true");
		rg_remote_set(&options, "application_name", "replica_gate");
		conn = rg_remote_connect(&options, deadline,
								 RG_WAIT_EVENT(rg_upstream_event, "ReplicaGateUpstream"),
								 &error);
	}
	PG_TRY();
	{
		if (conn != NULL)
		{
			state = rg_upstream_answer(conn, deadline, unflushed_us);
			error = "no answer";
		}
		if (state == RG_UPSTREAM_UNKNOWN && log_failure)
			ereport(LOG,
					(errmsg("replica_gate could not ask the WAL sender at \"%s\" port %d whether it is a standby: %s",
							host, port, error),
					 errdetail("Staleness is unknown until the question succeeds; it is retried every second.")));
	}
	PG_FINALLY();
	{
		rg_remote_finish(conn);
	}
	PG_END_TRY();
	return state;
}

/* A question ended by an error or exit: make its key UNKNOWN again. */
static void
rg_upstream_abandon(int code, Datum arg)
{
	const RgUpstreamKey *key = (const RgUpstreamKey *) DatumGetPointer(arg);
	TimestampTz retry = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													RG_UPSTREAM_RETRY_MS);

	SpinLockAcquire(&rg_upstream->mutex);
	if (rg_upstream_same_key(&rg_upstream->key, key) &&
		rg_upstream->state == RG_UPSTREAM_ASKING)
	{
		rg_upstream->state = RG_UPSTREAM_UNKNOWN;
		rg_upstream->retry_after = retry;
	}
	SpinLockRelease(&rg_upstream->mutex);
}

/*
 * rg_upstream_is_primary
 *		Is the sender of WAL receiver connection "key" the primary?  Asks it
 *		the first time for each key; false until an answer is known, and
 *		without preload.  When true, *since is when the answer came: the
 *		sender was a primary then, and stays one, so the messages it sent
 *		from then on tell how fresh the primary's data is; *unflushed_us is
 *		how long a commit may be visible there before the WAL it sends
 *		contains it.
 */
bool
rg_upstream_is_primary(const RgUpstreamKey *key, TimestampTz *since,
					   int64 *unflushed_us)
{
	WalRcvData *walrcv = WalRcv;
	RgUpstreamState state;
	TimestampTz now = GetCurrentTimestamp();
	char		host[NI_MAXHOST];
	int			port;
	bool		ask;
	bool		log_failure;

	if (rg_upstream == NULL)
		return false;

	SpinLockAcquire(&rg_upstream->mutex);
	if (!rg_upstream_same_key(&rg_upstream->key, key))
	{
		rg_upstream->key = *key;
		rg_upstream->state = RG_UPSTREAM_UNKNOWN;
		rg_upstream->retry_after = 0;
		rg_upstream->failed_once = false;
	}
	state = rg_upstream->state;
	*since = rg_upstream->answered_at;
	*unflushed_us = rg_upstream->unflushed_us;
	log_failure = !rg_upstream->failed_once;
	ask = (state == RG_UPSTREAM_UNKNOWN && now >= rg_upstream->retry_after);
	if (ask)
		rg_upstream->state = RG_UPSTREAM_ASKING;
	SpinLockRelease(&rg_upstream->mutex);

	if (!ask)
		return state == RG_UPSTREAM_PRIMARY;

	/* where the WAL receiver is connected, if still the same connection */
	SpinLockAcquire(&walrcv->mutex);
	strlcpy(host, walrcv->ready_to_display ? walrcv->sender_host : "", sizeof(host));
	port = walrcv->sender_port;
	SpinLockRelease(&walrcv->mutex);

	state = RG_UPSTREAM_UNKNOWN;
	if (host[0] != '\0')
	{
		PG_ENSURE_ERROR_CLEANUP(rg_upstream_abandon, PointerGetDatum(key));
		{
			state = rg_upstream_ask(host, port, log_failure, unflushed_us);
		}
		PG_END_ENSURE_ERROR_CLEANUP(rg_upstream_abandon, PointerGetDatum(key));
	}

	now = GetCurrentTimestamp();
	SpinLockAcquire(&rg_upstream->mutex);
	if (rg_upstream_same_key(&rg_upstream->key, key))
	{
		rg_upstream->state = state;
		rg_upstream->answered_at = now;
		rg_upstream->unflushed_us = *unflushed_us;
		if (state == RG_UPSTREAM_UNKNOWN)
		{
			rg_upstream->retry_after = TimestampTzPlusMilliseconds(now, RG_UPSTREAM_RETRY_MS);
			rg_upstream->failed_once |= (host[0] != '\0');
		}
	}
	SpinLockRelease(&rg_upstream->mutex);
	*since = now;
	return state == RG_UPSTREAM_PRIMARY;
}
