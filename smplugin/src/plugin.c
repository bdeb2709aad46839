/* plugin.c - the OpenSM side: event plugin interface version 2
 * (include/opensm/osm_event_plugin.h), each event of interest turned into one
 * spool record (spool.c). Loaded by opensm.conf's event_plugin_name qoslane_sm. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include <opensm/osm_event_plugin.h>
#include <opensm/osm_log.h>
#include <opensm/osm_node.h>
#include <opensm/osm_opensm.h>
#include <opensm/osm_switch.h>
#include <opensm/osm_version.h>

#include "plugin.h"

/* The record of one OpenSM event, or 0 when the event is not one qoslane
 * reads (the performance manager's counters). event_data as OpenSM passes it. */
int qsm_translate(int event_id, const void *event_data, struct qsm_record *r)
{
	memset(r, 0, sizeof(*r));
	switch (event_id) {
	case OSM_EVENT_ID_SUBNET_UP:
		r->kind = QSM_SUBNET_UP;
		return 1;
	case OSM_EVENT_ID_HEAVY_SWEEP_START:
		r->kind = QSM_HEAVY_SWEEP_START;
		return 1;
	case OSM_EVENT_ID_HEAVY_SWEEP_DONE:
		r->kind = QSM_HEAVY_SWEEP_DONE;
		return 1;
	case OSM_EVENT_ID_UCAST_ROUTING_DONE:
		/* the flag itself is the pointer's value */
		r->kind = QSM_UCAST_ROUTING_DONE;
		r->flags = (uint8_t)(uintptr_t)event_data;
		return 1;
	case OSM_EVENT_ID_STATE_CHANGE:
		r->kind = QSM_STATE_CHANGE;
		return 1;
	case OSM_EVENT_ID_SA_DB_DUMPED:
		r->kind = QSM_SA_DB_DUMPED;
		return 1;
	case OSM_EVENT_ID_LFT_CHANGE: {
		const osm_epi_lft_change_event_t *e = event_data;
		r->kind = QSM_LFT_CHANGE;
		if (e) {
			r->flags = (uint8_t)e->flags;
			r->lft_top = e->lft_top;
			r->block = e->block_num;
			if (e->p_sw && e->p_sw->p_node)
				r->guid = cl_ntoh64(
					osm_node_get_node_guid(e->p_sw->p_node));
		}
		return 1;
	}
	case OSM_EVENT_ID_TRAP: {
		const ib_mad_notice_attr_t *n = event_data;
		r->kind = QSM_TRAP;
		if (n && ib_notice_is_generic(n))
			r->block = cl_ntoh16(n->g_or_v.generic.trap_num);
		return 1;
	}
	default: /* PORT_ERRORS, PORT_DATA_COUNTERS, PORT_SELECT, later ones */
		return 0;
	}
}

void *qsm_create_with(const char *options, qsm_logger log, void *log_ctx)
{
	char dir[PATH_MAX], err[PATH_MAX + 128];
	uint64_t cap;
	if (qsm_parse_options(options, dir, sizeof(dir), &cap, err, sizeof(err))) {
		log(log_ctx, 1, err);
		return NULL;
	}
	/* the one allocation, at load */
	struct qsm_spool *s = malloc(sizeof(*s));
	if (!s) {
		log(log_ctx, 1, "out of memory");
		return NULL;
	}
	if (qsm_spool_open(s, dir, cap, err, sizeof(err))) {
		log(log_ctx, 1, err);
		free(s);
		return NULL;
	}
	snprintf(err, sizeof(err), "spooling to %s/%s (at most %llu bytes)", dir,
		 QSM_SPOOL_FILE, (unsigned long long)cap);
	log(log_ctx, 0, err);
	return s;
}

void qsm_report(void *data, int event_id, void *event_data)
{
	struct qsm_record r;
	if (data && qsm_translate(event_id, event_data, &r))
		qsm_spool_emit(data, &r);
}

void qsm_delete_with(void *data, qsm_logger log, void *log_ctx)
{
	struct qsm_spool *s = data;
	char msg[160];
	if (!s)
		return;
	qsm_spool_close(s);
	snprintf(msg, sizeof(msg),
		 "stopped: %llu records written, %llu events dropped, %llu files started",
		 (unsigned long long)atomic_load(&s->written),
		 (unsigned long long)atomic_load(&s->dropped),
		 (unsigned long long)atomic_load(&s->reopened) + 1);
	log(log_ctx, 0, msg);
	free(s);
}

/* ---- OpenSM's face ---- */

static void osm_logger(void *ctx, int error, const char *msg)
{
	osm_log(ctx, error ? OSM_LOG_ERROR : OSM_LOG_INFO, "qoslane_sm: %s\n", msg);
}

/* packaging/build.sh names the package's build (QOSLANE_BUILD: version-revision and commit) */
#ifndef QSM_BUILD
#define QSM_BUILD "unpackaged"
#endif

struct qsm_handle {
	void *spool;
	osm_log_t *log;
};

static void *create(struct osm_opensm *osm)
{
	struct qsm_handle *h = malloc(sizeof(*h));
	if (!h)
		return NULL;
	h->log = &osm->log;
	h->spool = qsm_create_with(osm->subn.opt.event_plugin_options, osm_logger,
				   h->log);
	if (!h->spool) {
		free(h);
		return NULL;
	}
	/* which build OpenSM loaded: the package's version, revision and commit */
	osm_log(h->log, OSM_LOG_INFO, "qoslane_sm: build %s, for %s\n", QSM_BUILD,
		OSM_VERSION);
	return h;
}

static void delete(void *data)
{
	struct qsm_handle *h = data;
	if (!h)
		return;
	qsm_delete_with(h->spool, osm_logger, h->log);
	free(h);
}

static void report(void *data, osm_epi_event_id_t event_id, void *event_data)
{
	struct qsm_handle *h = data;
	if (h)
		qsm_report(h->spool, (int)event_id, event_data);
}

/* OpenSM looks this symbol up and loads the plugin only when osm_version is
 * its own version string: a plugin built against another libopensm is skipped. */
#ifndef QSM_OSM_VERSION /* another only to test OpenSM's refusal (make mismatch) */
#define QSM_OSM_VERSION OSM_VERSION
#endif
__attribute__((visibility("default"))) osm_event_plugin_t osm_event_plugin = {
	.osm_version = QSM_OSM_VERSION,
	.create = create,
	.delete = delete,
	.report = report,
};
