/*-------------------------------------------------------------------------
 *
 * question.h
 *		Asking the primary where it is, for strong reads (question.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_QUESTION_H
#define RG_QUESTION_H

#include "datatype/timestamp.h"

#include "guard.h"
#include "common.h"

/* Why a question brought no answer. */
typedef enum RgQuestionFailure
{
	RG_QUESTION_NO_WORKER,		/* no question worker runs here */
	RG_QUESTION_BAD_CONNINFO,	/* the connection options cannot be parsed */
	RG_QUESTION_CONNECT,		/* the connection failed */
	RG_QUESTION_LOST,			/* no answer: timed out or connection lost */
	RG_QUESTION_REFUSED,		/* the query failed there */
	RG_QUESTION_STANDBY,		/* the server asked is in recovery */
	RG_QUESTION_OTHER_SYSTEM,	/* the server asked is another cluster */
	RG_QUESTION_OLD_TIMELINE,	/* it is on an older timeline than we are */
	RG_QUESTION_RECOVERY_ENDED	/* this server left recovery */
} RgQuestionFailure;

/* How a backend's question ended. */
typedef enum RgAskResult
{
	RG_ASK_ANSWERED,
	RG_ASK_FAILED,				/* see RgQuestionFailure */
	RG_ASK_TIMEOUT,
	RG_ASK_GAVE_WAY				/* the guard saw replay wait on us */
} RgAskResult;

extern Size rg_question_shmem_size(void);
extern void rg_question_shmem_init(void);
extern RgAskResult rg_question_ask(TimestampTz deadline, RgGuard *guard,
								   RgTarget *answer, RgQuestionFailure *why);
extern const char *rg_question_state(void);

#endif							/* RG_QUESTION_H */
