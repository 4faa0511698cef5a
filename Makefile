# replica_gate: PGXS build.
#
#   make && make install                  build and install (on every node)
#   make installcheck                     pg_regress suite on a throwaway instance
#   bash test/run [--all]                 the whole suite (regress, pgTAP, TAP), see README

EXTENSION = replica_gate
MODULE_big = replica_gate
OBJS = \
	src/ack.o \
	src/commit_wait.o \
	src/gate.o \
	src/guard.o \
	src/lease.o \
	src/lease_waker.o \
	src/proof.o \
	src/question.o \
	src/remote.o \
	src/replan.o \
	src/replica_gate.o \
	src/session.o \
	src/set_gate.o \
	src/settings.o \
	src/shmem.o \
	src/staleness.o \
	src/stats.o \
	src/target.o \
	src/token.o \
	src/upstream.o \
	src/wait.o \
	src/watcher.o \
	src/watcher_arrival.o \
	src/watcher_registry.o

DATA = $(wildcard sql/$(EXTENSION)--*.sql)
PGFILEDESC = "replica_gate - gate replica reads on WAL replay"

# pg_regress: every sql/*.sql that is not an install script, run on a
# throwaway instance with the library preloaded.
REGRESS = $(sort $(filter-out $(EXTENSION)--%,$(notdir $(basename $(wildcard sql/*.sql)))))
REGRESS_OPTS = --temp-instance=tmp_check_regress --temp-config=test/regress.conf

EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)
PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir) -DRG_VERSION='"$(EXTVERSION)"'
# libpq: src/remote.c connects to the primary and to the WAL sender
SHLIB_LINK_INTERNAL = $(libpq)

# PGXS of 16 and later prints "+++ regress install-check in $(subdir) +++"
# before pg_regress: name the extension there (PGXS uses subdir for nothing
# else but make check, which it does not support).
subdir = $(EXTENSION)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

EXTRA_CLEAN = tmp_check_regress tmp_check

# local_preload_libraries loads libraries only from $libdir/plugins: a link
# there lets any role load replica_gate when its sessions start, which the
# session mode needs on a server that does not preload it (README).  The
# server recognises the link as the library it may have preloaded.
install: install-plugin-link
uninstall: uninstall-plugin-link
.PHONY: install-plugin-link uninstall-plugin-link
install-plugin-link: install-lib
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)/plugins'
	ln -sf ../$(MODULE_big)$(DLSUFFIX) '$(DESTDIR)$(pkglibdir)/plugins/$(MODULE_big)$(DLSUFFIX)'
uninstall-plugin-link:
	rm -f '$(DESTDIR)$(pkglibdir)/plugins/$(MODULE_big)$(DLSUFFIX)'
