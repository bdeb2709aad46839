/* plugin.h - the plugin's core, callable without an SM (the fuzz harness). */
#ifndef QSM_PLUGIN_H
#define QSM_PLUGIN_H

#include "spool.h"

typedef void (*qsm_logger)(void *ctx, int error, const char *msg);

int qsm_translate(int event_id, const void *event_data, struct qsm_record *r);
void *qsm_create_with(const char *options, qsm_logger log, void *log_ctx);
void qsm_report(void *spool, int event_id, void *event_data);
void qsm_delete_with(void *spool, qsm_logger log, void *log_ctx);

#endif
