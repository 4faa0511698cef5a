/*-------------------------------------------------------------------------
 *
 * remote.h
 *		Client connections to another server of the cluster (remote.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_REMOTE_H
#define RG_REMOTE_H

#include "datatype/timestamp.h"
#include "libpq-fe.h"

/* Connection options, as keyword and value arrays for libpq. */
typedef struct RgRemoteOptions
{
	int			n;
	const char *keys[64];
	const char *values[64];
} RgRemoteOptions;

extern bool rg_remote_add_conninfo(RgRemoteOptions *options, const char *conninfo);
extern const char *rg_remote_get(const RgRemoteOptions *options,
								 const char *key);
extern void rg_remote_set(RgRemoteOptions *options, const char *key,
						  const char *value);
extern PGconn *rg_remote_connect(RgRemoteOptions *options, TimestampTz deadline,
								 uint32 wait_event, char **error);
extern PGresult *rg_remote_query(PGconn *conn, const char *query,
								 TimestampTz deadline, uint32 wait_event);
extern PGresult *rg_remote_execute(PGconn *conn, const char *name, int nparams,
									const char *const *params,
									TimestampTz deadline, uint32 wait_event);
extern void rg_remote_finish(PGconn *conn);

#endif							/* RG_REMOTE_H */
