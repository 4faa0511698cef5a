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
 * the question worker (question.c) finds out, once per WAL receiver
 * connection and timeline, over its connection to the primary.
 *
 * The sender is the primary when the server the question worker reaches is
 * a primary of this cluster (question.c checks that when it connects) and
 * has a WAL sender streaming to this standby: a physical WAL sender under
 * the WAL receiver's application_name, connected from the address the
 * question's own connection comes from, streaming from the start point and
 * timeline this WAL receiver asked for (client_port and query are hidden
 * where the question's user may not see them: no match).  Another standby
 * matches only with the same address, name, start point and timeline (on
 * 13, whose WAL senders show no command, the same address and name).  The
 * server is found the way the question finds it, hostaddr and
 * replica_gate.primary_conninfo included, and is never trusted for being
 * reachable at the name the WAL receiver reports (a host name resolved
 * again, a virtual IP, a load balancer or a multi-host list can lead
 * elsewhere).  A primary also says
 * how long a commit made with synchronous_commit = off may stay unflushed
 * there, and so unsent: three times its wal_writer_delay (the WAL writer's
 * promise); staleness.c widens its bound by as much.
 *
 * The WAL sender found is also the one whose lease this standby's questions
 * ask for (lease.c), by its pid and start: only when it was the one match,
 * the question logs in as the WAL receiver does, the primary looked after
 * its START_REPLICATION (rg_upstream_wanted) and this connection got a
 * message it sent after the primary looked (rg_upstream_sender).
 *
 * Backends never ask: a backend that finds no answer for the current WAL
 * receiver connection marks the answer wanted, wakes the worker and goes
 * on with "not the primary" (staleness unknown, gates on it fail closed);
 * a waiting gate sees the answer at its next check.  Messages sent before
 * the answer count for nothing, since the sender may have been a standby
 * when it sent them.  A question that failed or found no such WAL sender
 * (the WAL receiver may not have restarted streaming yet after a timeline
 * switch) is asked again after RG_UPSTREAM_RETRY_MS, when wanted.  Without
 * shared_preload_libraries nothing is asked and the sender counts as a
 * standby.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "replication/walreceiver.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "remote.h"
#include "target.h"
#include "upstream.h"

/* After a failed question, the next one waits this long. */
#define RG_UPSTREAM_RETRY_MS		1000

/*
 * Does the server asked stream to us?  Its clock when it looked, its
 * wal_writer_delay (NULL: it is in recovery), and how many of its WAL
 * senders match ours, with the pid and start of one.  Then, on a primary,
 * a WAL record of no effect, so that a message of each WAL sender soon
 * follows the question, idle primary or not (the confirmation, below).
 * The start comes as text, in the form the question's connection prints
 * and reads back (grant_lease() takes it).
 * The arguments: the WAL receiver's application_name as a literal, and
 * RG_SENDER_QUERY_PATTERN for the start point and timeline of its
 * START_REPLICATION (printed as libpqwalreceiver prints them, as pg_lsn
 * does on each version).
 */
#define RG_UPSTREAM_SQL \
	"SELECT (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::pg_catalog.int8," \
	" CASE WHEN NOT pg_catalog.pg_is_in_recovery()" \
	" THEN pg_catalog.current_setting('wal_writer_delay') END, count(*), min(pid)," \
	" min(backend_start), CASE WHEN NOT pg_catalog.pg_is_in_recovery()" \
	" THEN pg_catalog.pg_logical_emit_message(false, 'replica_gate', '') END" \
	" FROM pg_catalog.pg_stat_activity" \
	" WHERE backend_type = 'walsender' AND datid IS NULL" \
	" AND application_name = %s AND client_port IS NOT NULL" \
	" AND client_addr IS NOT DISTINCT FROM pg_catalog.inet_client_addr()" \
	" AND coalesce(query, '') LIKE '%s'"

typedef enum RgUpstreamState
{
	RG_UPSTREAM_UNKNOWN,		/* not asked yet, or the question failed */
	RG_UPSTREAM_PRIMARY,
	RG_UPSTREAM_STANDBY
} RgUpstreamState;

/* The answer for one WAL receiver connection and timeline. */
typedef struct RgUpstream
{
	slock_t		mutex;
	Latch	   *worker_latch;	/* the question worker's, NULL if none */
	bool		wanted;			/* a backend found no answer for the key */
	RgUpstreamKey key;
	RgUpstreamState state;
	TimestampTz answered_at;	/* when the sender answered */
	int64		unflushed_us;	/* a primary's 3 * wal_writer_delay */
	pid_t		sender_pid;		/* a primary's WAL sender, 0: not one alone */
	char		sender_start[RG_SENDER_START_LEN];	/* its start, as text */
	TimestampTz asked_at;		/* the primary's clock when it looked */
	TimestampTz retry_after;	/* UNKNOWN after a failure: not before then */
} RgUpstream;

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
 * rg_upstream_read_receiver
 *		Read what the WAL receiver knows.
 *
 * A starting walreceiver marks itself streaming and stamps its message
 * times with this server's clock before it has connected (13 to 18), so
 * until a message has arrived on the current connection both times are the
 * same value and nothing is known: not streaming, no send time.  A message
 * from the primary carries its send time, never equal to the receipt time
 * to the microsecond except by a coincidence that only makes the bound
 * unknown for one message.
 */
void
rg_upstream_read_receiver(RgReceiver *rcv)
{
	WalRcvData *walrcv = WalRcv;
	TimestampTz receipt_time;

	SpinLockAcquire(&walrcv->mutex);
	rcv->streaming = (walrcv->walRcvState == WALRCV_STREAMING);
	rcv->received = walrcv->flushedUpto;
	rcv->wal_end = walrcv->latestWalEnd;
	rcv->sent_time = walrcv->lastMsgSendTime;
	receipt_time = walrcv->lastMsgReceiptTime;
	rcv->connection.pid = walrcv->pid;
	rcv->connection.started = walrcv->startTime;
	rcv->connection.tli = walrcv->receiveStartTLI;
	SpinLockRelease(&walrcv->mutex);

	if (rcv->sent_time == receipt_time)
	{
		rcv->streaming = false;
		rcv->sent_time = 0;
	}
}

/*
 * rg_upstream_read_primary
 *		Read what the WAL receiver knows (rg_upstream_read_receiver), and
 *		tell whether its last message came from the primary: it streams,
 *		has heard from its sender, and that sender is known to have been
 *		the primary when it sent the message; *unflushed_us as
 *		rg_upstream_is_primary gives it.
 */
bool
rg_upstream_read_primary(RgReceiver *rcv, int64 *unflushed_us)
{
	TimestampTz since;

	rg_upstream_read_receiver(rcv);
	return rcv->streaming && rcv->sent_time != 0 &&
		rg_upstream_is_primary(&rcv->connection, &since, unflushed_us) &&
		rcv->sent_time >= since;
}

/*
 * rg_upstream_is_primary
 *		Is the sender of WAL receiver connection "key" the primary?  False
 *		until the question worker has found out (this call asks it to), and
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
	Latch	   *worker = NULL;
	TimestampTz now = GetCurrentTimestamp();
	bool		primary;

	if (rg_upstream == NULL)
		return false;

	SpinLockAcquire(&rg_upstream->mutex);
	if (!rg_upstream_same_key(&rg_upstream->key, key) ||
		(rg_upstream->state == RG_UPSTREAM_UNKNOWN &&
		 now >= rg_upstream->retry_after))
	{
		if (!rg_upstream->wanted)
			worker = rg_upstream->worker_latch;
		rg_upstream->wanted = true;
		primary = false;
	}
	else
	{
		primary = (rg_upstream->state == RG_UPSTREAM_PRIMARY);
		*since = rg_upstream->answered_at;
		*unflushed_us = rg_upstream->unflushed_us;
	}
	SpinLockRelease(&rg_upstream->mutex);
	if (worker != NULL)
		SetLatch(worker);
	return primary;
}

/*
 * rg_upstream_sender
 *		In the question worker: the pid and the start (text, room for
 *		RG_SENDER_START_LEN), on the primary, of the WAL sender process that streams to the WAL receiver's current
 *		connection, if that is known to be the primary's, no other WAL
 *		sender matched it, and the WAL receiver has since got a message
 *		its sender sent after the primary looked (the confirmation);
 *		else false.  A lease is granted to that WAL sender (lease.c).
 *
 * The confirmation: the primary's query sees the WAL senders then
 * streaming.  If this standby's own had exited already, unnoticed (its
 * WAL receiver still waiting on a connection that is gone), another
 * standby's WAL sender of the same name, address, start point and
 * timeline would be the one match, and named as ours.  A message that
 * this connection got, sent after the query on the primary's clock, shows
 * that our WAL sender was streaming while the query looked, so that it was
 * a match: the one.  The query writes a WAL record of no effect, so that
 * such a message follows on an idle primary too.
 */
bool
rg_upstream_sender(pid_t *pid, char *start)
{
	RgReceiver	rcv;
	bool		known;

	rg_upstream_read_receiver(&rcv);
	SpinLockAcquire(&rg_upstream->mutex);
	known = rg_upstream_same_key(&rg_upstream->key, &rcv.connection) &&
		rg_upstream->state == RG_UPSTREAM_PRIMARY &&
		rg_upstream->sender_pid != 0 && rcv.sent_time > rg_upstream->asked_at;
	*pid = rg_upstream->sender_pid;
	strlcpy(start, rg_upstream->sender_start, RG_SENDER_START_LEN);
	SpinLockRelease(&rg_upstream->mutex);
	return known;
}

/* The question worker starts (its latch) or leaves (NULL). */
void
rg_upstream_attach(Latch *worker)
{
	SpinLockAcquire(&rg_upstream->mutex);
	rg_upstream->worker_latch = worker;
	SpinLockRelease(&rg_upstream->mutex);
}

/*
 * rg_upstream_forget
 *		In the question worker: the settings that lead to the primary
 *		changed, so the answer may too; ask again when wanted.
 */
void
rg_upstream_forget(void)
{
	SpinLockAcquire(&rg_upstream->mutex);
	rg_upstream->state = RG_UPSTREAM_UNKNOWN;
	rg_upstream->retry_after = 0;
	SpinLockRelease(&rg_upstream->mutex);
}

/*
 * rg_upstream_wanted
 *		In the question worker: has a backend found no answer for the WAL
 *		receiver's connection, and may the primary be asked now?  Then *key
 *		is that connection, now, and *start where it started streaming.
 *
 * Not before the WAL receiver has got a message of that stream: the WAL
 * sender streaming to it must show its START_REPLICATION on the primary
 * before the question looks, or another standby's WAL sender that looks
 * the same could be the one match (rg_upstream_sender).  On a new
 * connection any message will do (a starting WAL receiver stamps both of
 * its message times alike until one arrives); at a timeline switch a WAL
 * receiver keeps its connection and takes the new key before its new
 * START_REPLICATION, so one sent since the worker first saw the key.
 * Until then the answer stays wanted, and the worker asks again at its
 * next round.
 */
bool
rg_upstream_wanted(RgUpstreamKey *key, XLogRecPtr *start)
{
	static RgUpstreamKey seen;
	static TimestampTz seen_sent;	/* 0: a new connection */
	WalRcvData *walrcv = WalRcv;
	TimestampTz sent;
	TimestampTz received;
	bool		wanted;

	SpinLockAcquire(&rg_upstream->mutex);
	wanted = rg_upstream->wanted;
	rg_upstream->wanted = false;
	SpinLockRelease(&rg_upstream->mutex);
	if (!wanted)
		return false;

	SpinLockAcquire(&walrcv->mutex);
	key->pid = walrcv->pid;
	key->started = walrcv->startTime;
	key->tli = walrcv->receiveStartTLI;
	*start = walrcv->receiveStart;
	sent = walrcv->lastMsgSendTime;
	received = walrcv->lastMsgReceiptTime;
	SpinLockRelease(&walrcv->mutex);
	if (!rg_upstream_same_key(key, &seen))
	{
		/* the same connection, another timeline: a switch */
		seen_sent = (key->pid == seen.pid && key->started == seen.started) ?
			sent : 0;
		seen = *key;
	}
	if (sent != received && (seen_sent == 0 || sent != seen_sent))
		return true;
	SpinLockAcquire(&rg_upstream->mutex);
	rg_upstream->wanted = true;
	SpinLockRelease(&rg_upstream->mutex);
	return false;
}

/*
 * rg_upstream_receiver_name
 *		The application_name the WAL receiver connects with (a literal for
 *		conn): primary_conninfo's ("receiver", parsed), else PGAPPNAME, else
 *		cluster_name or "walreceiver" (libpqwalreceiver's fallback), cut as
 *		the server cuts it.
 */
static char *
rg_upstream_receiver_name(PGconn *conn, const RgRemoteOptions *receiver)
{
	const char *name = rg_remote_get(receiver, "application_name");
	char		cut[NAMEDATALEN];
	char	   *literal;
	char	   *result;

	if (name == NULL)
		name = getenv("PGAPPNAME");
	if (name == NULL || name[0] == '\0')
		name = (cluster_name != NULL && cluster_name[0] != '\0') ?
			cluster_name : "walreceiver";
	strlcpy(cut, name, sizeof(cut));
	literal = PQescapeLiteral(conn, cut, strlen(cut));
	if (literal == NULL)
		return NULL;
	result = pstrdup(literal);
	PQfreemem(literal);
	return result;
}

/*
 * rg_upstream_same_role
 *		Does the question's connection "conn" log in as the WAL receiver
 *		does (primary_conninfo's user, "receiver" parsed, else libpq's
 *		default)?  Only then does the primary show it its own WAL sender's
 *		row (another role's rows hide their address and port: another
 *		standby's WAL sender of the question's role could be the one match),
 *		and only then may it be granted that WAL sender's lease (lease.c).
 */
static bool
rg_upstream_same_role(PGconn *conn, const RgRemoteOptions *receiver)
{
	const char *user = rg_remote_get(receiver, "user");
	PQconninfoOption *defaults = NULL;
	bool		same;

	if (user == NULL && (defaults = PQconndefaults()) != NULL)
	{
		for (PQconninfoOption *o = defaults; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "user") == 0)
				user = o->val;
	}
	same = user != NULL && PQuser(conn) != NULL && strcmp(user, PQuser(conn)) == 0;
	if (defaults != NULL)
		PQconninfoFree(defaults);
	return same;
}

/*
 * rg_upstream_check
 *		In the question worker: find out whether the sender of WAL receiver
 *		connection "key", streaming since "start", is the server on "conn",
 *		a primary of this cluster, and publish the answer.  conn is NULL
 *		when that server could not be reached or is not one: "in_recovery"
 *		says it is a standby (so the sender is not the primary either), else
 *		the question failed.  False if the query failed: the connection is
 *		then unusable.  Failures are logged once per WAL receiver
 *		connection.
 */
bool
rg_upstream_check(PGconn *conn, bool in_recovery, const RgUpstreamKey *key,
				  XLogRecPtr start, TimestampTz deadline, uint32 wait_event)
{
	static RgUpstreamKey logged;
	RgUpstreamState state = in_recovery ? RG_UPSTREAM_STANDBY : RG_UPSTREAM_UNKNOWN;
	int			level = rg_upstream_same_key(&logged, key) ? DEBUG1 : LOG;
	int64		unflushed_us = 0;
	pid_t		sender_pid = 0;
	const char *sender_start = "";
	TimestampTz asked_at = 0;
	PGresult   *res = NULL;
	RgRemoteOptions receiver = {0};
	char	   *name = NULL;
	TimestampTz now;
	int			delay_ms;
	bool		ok = true;

	/* the WAL receiver's connection options (none if they do not parse) */
	(void) rg_remote_add_conninfo(&receiver, PrimaryConnInfo);
	if (conn != NULL && (name = rg_upstream_receiver_name(conn, &receiver)) != NULL)
		res = rg_remote_query(conn,
							  psprintf(RG_UPSTREAM_SQL, name,
									   RG_SENDER_QUERY_PATTERN(rg_lsn_text(start),
															   key->tli)),
							  deadline, wait_event);
	if (conn != NULL && (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK ||
						 PQnfields(res) != 6 || PQntuples(res) != 1))
	{
		ok = false;
		ereport(level,
				(errmsg("replica_gate could not ask the primary whether this standby streams from it: %s",
						res != NULL ? pchomp(PQresultErrorMessage(res)) :
						PQstatus(conn) == CONNECTION_BAD ? pchomp(PQerrorMessage(conn)) :
						"timed out"),
				 errdetail("Staleness is unknown until the question succeeds.")));
	}
	else if (res == NULL)
		;						/* no server to ask: the caller logged why */
	else if (PQgetisnull(res, 0, 1))
		state = RG_UPSTREAM_STANDBY;	/* in recovery since it connected */
	else if (strcmp(PQgetvalue(res, 0, 2), "0") == 0)
		ereport(level,
				(errmsg("replica_gate finds no WAL sender streaming to this standby on the primary"),
				 errdetail("Until it does, this standby counts as streaming from another server: its staleness is unknown."),
				 errhint("The primary must show the role the question connects as a WAL sender named %s, connected from the address the question's connection comes from, streaming from %s on timeline %u (on 14 and later its query must show: track_activities on).",
						 name, rg_lsn_text(start), key->tli)));
	else if (parse_int(PQgetvalue(res, 0, 1), &delay_ms, GUC_UNIT_MS, NULL))
	{
		state = RG_UPSTREAM_PRIMARY;
		unflushed_us = 3 * (int64) delay_ms * 1000;
		/* the lease goes to the WAL sender only if it is the only match */
		if (strcmp(PQgetvalue(res, 0, 2), "1") == 0 &&
			strlen(PQgetvalue(res, 0, 4)) < RG_SENDER_START_LEN &&
			rg_upstream_same_role(conn, &receiver))
		{
			sender_pid = atoi(PQgetvalue(res, 0, 3));
			sender_start = PQgetvalue(res, 0, 4);
			/* us since the Unix epoch, as a TimestampTz */
			asked_at = (TimestampTz) strtoll(PQgetvalue(res, 0, 0), NULL, 10) -
				(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
		}
	}
	if (level == LOG && state != RG_UPSTREAM_PRIMARY && conn != NULL)
		logged = *key;

	now = GetCurrentTimestamp();
	SpinLockAcquire(&rg_upstream->mutex);
	rg_upstream->key = *key;
	rg_upstream->state = state;
	rg_upstream->answered_at = now;
	rg_upstream->unflushed_us = unflushed_us;
	rg_upstream->sender_pid = sender_pid;
	strlcpy(rg_upstream->sender_start, sender_start, RG_SENDER_START_LEN);
	rg_upstream->asked_at = asked_at;
	rg_upstream->retry_after = TimestampTzPlusMilliseconds(now, RG_UPSTREAM_RETRY_MS);
	SpinLockRelease(&rg_upstream->mutex);
	PQclear(res);
	return ok;
}
