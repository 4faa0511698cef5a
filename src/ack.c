/*-------------------------------------------------------------------------
 *
 * ack.c
 *		What a client hears of its commits, and when: a layer under every
 *		message a client session sends.  A commit reaches the client only
 *		through the messages its session sends after it; before the first
 *		of them leaves, whatever it is (the COMMIT's or a CALL's
 *		CommandComplete, a procedure's notice or error, a reply to Flush,
 *		ReadyForQuery), the session waits out the commit wait it owes
 *		(commit_wait.c) and reports its new token (token.c).
 *
 * Why messages and not the end of the transaction: a procedure commits
 * without ending its statement, then may raise, notice, be cancelled or
 * run on, and the extended protocol sends a statement's results at Flush,
 * before the Sync that ends its implicit transaction.  Every message
 * reaches the client through PqCommMethods (core swaps it in parallel
 * workers), so a wait there comes before any message after the commit, and
 * is charged to the statement that committed, never to a later one.  It
 * also runs after the transaction has released its locks: nobody waits for
 * the committing session while it waits.
 *
 * The layer is installed at the end of a client session's first
 * transaction, before
 * that transaction's own messages, and stays: a module that later swaps
 * PqCommMethods must send through the methods it found (core swaps them
 * only in parallel workers), or the commit wait is not paid.  A session
 * told to terminate while it waits sends nothing more: the commit is never
 * acknowledged.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "tcop/dest.h"

#include "ack.h"
#include "commit_wait.h"
#include "token.h"

/* Our methods, and those they send through (NULL: not installed yet). */
static PQcommMethods rg_ack_methods;
static const PQcommMethods *rg_ack_next = NULL;

/* Terminated while it waited: nothing more goes out. */
static bool rg_ack_silenced = false;

/*
 * rg_ack_before_message
 *		Before a message of type "msgtype" leaves: wait out the commit wait
 *		owed, then report the token of the commits since the last message.
 *		False if the message must not be sent.  A cancel that came during
 *		the wait is dropped when the message ends the statement (the
 *		commit is done), put back when the statement goes on (a notice
 *		after a procedure's COMMIT).  Must not throw: it runs while errors
 *		are being reported too.
 */
static bool
rg_ack_before_message(char msgtype)
{
	bool		cancelled = false;

	if (rg_ack_silenced)
		return false;
	if (!rg_commit_wait_pay(&cancelled))
	{
		rg_ack_silenced = true;
		whereToSendOutput = DestNone;
		return false;
	}
	if (cancelled && strchr("CEIZs", msgtype) == NULL)
	{
		QueryCancelPending = true;
		InterruptPending = true;
	}
	/* sends through the methods again, with nothing owed */
	rg_token_report();
	return true;
}

static int
rg_ack_putmessage(char msgtype, const char *s, size_t len)
{
	if (!rg_ack_before_message(msgtype))
		return 0;
	return rg_ack_next->putmessage(msgtype, s, len);
}

static void
rg_ack_putmessage_noblock(char msgtype, const char *s, size_t len)
{
	if (rg_ack_before_message(msgtype))
		rg_ack_next->putmessage_noblock(msgtype, s, len);
}

/*
 * rg_ack_xact_callback
 *		At the end of a client session's first transaction, before its
 *		messages, committed or not (COMMIT PREPARED may fail after its
 *		commit): put this layer under the session's messages.
 */
static void
rg_ack_xact_callback(XactEvent event, void *arg)
{
	if ((event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT) ||
		rg_ack_next != NULL || !rg_client_session())
		return;
	rg_ack_methods = *PqCommMethods;
	rg_ack_methods.putmessage = rg_ack_putmessage;
	rg_ack_methods.putmessage_noblock = rg_ack_putmessage_noblock;
	rg_ack_next = PqCommMethods;
	PqCommMethods = &rg_ack_methods;
}

/*
 * rg_ack_init
 *		Called from _PG_init.
 */
void
rg_ack_init(void)
{
	RegisterXactCallback(rg_ack_xact_callback, NULL);
}
