/*-------------------------------------------------------------------------
 *
 * replan.h
 *		Planning a gated statement again after its gate (replan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RG_REPLAN_H
#define RG_REPLAN_H

#include "nodes/params.h"
#include "nodes/plannodes.h"
#include "utils/queryenvironment.h"

#include "common.h"

extern bool rg_replan_needed(const PlannedStmt *stmt, const char *source);
extern PlannedStmt *rg_replan(const char *source, const PlannedStmt *old,
							  ParamListInfo params, QueryEnvironment *queryEnv,
							  int cursor_options);

#endif							/* RG_REPLAN_H */
