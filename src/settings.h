/*-------------------------------------------------------------------------
 *
 * settings.h
 *		The settings that several files read, and what loading the library
 *		found (settings.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_SETTINGS_H
#define RG_SETTINGS_H

#include "common.h"

/*
 * Whether the library was preloaded, and whether it was loaded when this
 * session started (preloaded, or local_preload_libraries and
 * session_preload_libraries), as opposed to by a later call.
 */
extern bool rg_preloaded;
extern bool rg_loaded_at_start;

extern int	rg_default_timeout;
extern int	rg_max_timeout;
extern double rg_poll_interval;
extern char *rg_primary_conninfo;
extern int	rg_commit_wait_ms;

extern void rg_settings_init(void);

#endif							/* RG_SETTINGS_H */
