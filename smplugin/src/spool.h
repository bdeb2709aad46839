/* spool.h - the never-blocking record writer of the qoslane OpenSM plugin.
 * No OpenSM header here: the fuzz harness drives it without an SM. */
#ifndef QSM_SPOOL_H
#define QSM_SPOOL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

#define QSM_SPOOL_FILE "events"
#define QSM_DEFAULT_DIR "/run/qoslane-sm"
#define QSM_DEFAULT_CAP (1024u * 1024u) /* 16384 records */
#define QSM_MIN_CAP (4u * QSM_RECORD_SIZE)

struct qsm_spool {
	int dirfd;
	int fd;                       /* its number never changes: dup3 replaces the file */
	_Atomic uint64_t ino;         /* the file behind fd */
	_Atomic uint64_t marked_ino;  /* the file that has its OVERFLOW marker */
	_Atomic uint64_t reserved;    /* bytes of the file given to writes */
	_Atomic uint64_t seq;         /* the last sequence number given */
	_Atomic uint64_t dropped;     /* sequence numbers not written, since load */
	_Atomic uint64_t written;     /* records written, since load */
	_Atomic uint64_t reopened;    /* new files started (the reader took one) */
	uint64_t instance;
	uint64_t cap;
	pthread_mutex_t reopen;       /* only ever trylock'ed */
	char dir[PATH_MAX];           /* made and opened again when it was removed */
};

/* Parse the plugin's words of event_plugin_options (shared by every
 * plugin: other words are ignored): qoslane_spool=DIR, qoslane_spool_max=BYTES.
 * dir must hold PATH_MAX bytes. 0, or -1 with a message in err. */
int qsm_parse_options(const char *options, char *dir, size_t dirlen,
		      uint64_t *cap, char *err, size_t errlen);

/* Open (create: mode 0755, one level) the directory and the spool file;
 * write the START record. 0, or -1 with a message in err. */
int qsm_spool_open(struct qsm_spool *s, const char *dir, uint64_t cap,
		   char *err, size_t errlen);

/* Give r a sequence number, the instance and the time, and append it, or
 * count it dropped. Never blocks: no lock waited for, no allocation, one
 * fstatat, at most one openat and fstat, one write(2) of 64 bytes (two when the
 * file just became full: the OVERFLOW marker). Thread-safe. */
void qsm_spool_emit(struct qsm_spool *s, struct qsm_record *r);

/* Write the STOP record and close. */
void qsm_spool_close(struct qsm_spool *s);

#endif
