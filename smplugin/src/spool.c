/* spool.c - see spool.h and smplugin/README.md. */
#define _GNU_SOURCE
#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int qsm_parse_options(const char *options, char *dir, size_t dirlen,
		      uint64_t *cap, char *err, size_t errlen)
{
	snprintf(dir, dirlen, "%s", QSM_DEFAULT_DIR);
	*cap = QSM_DEFAULT_CAP;
	if (!options)
		return 0;
	const char *p = options;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *w = p;
		while (*p && *p != ' ' && *p != '\t' && *p != ',')
			p++;
		size_t n = (size_t)(p - w);
		static const char k_dir[] = "qoslane_spool=";
		static const char k_max[] = "qoslane_spool_max=";
		if (n > sizeof(k_max) - 1 && !strncmp(w, k_max, sizeof(k_max) - 1)) {
			char num[32];
			size_t m = n - (sizeof(k_max) - 1);
			if (m >= sizeof(num)) {
				snprintf(err, errlen, "qoslane_spool_max: not a number");
				return -1;
			}
			memcpy(num, w + sizeof(k_max) - 1, m);
			num[m] = 0;
			char *end;
			errno = 0;
			/* digits only: strtoull takes "-1" for 2^64-1 */
			unsigned long long v = strtoull(num, &end, 10);
			if (num[0] < '0' || num[0] > '9' || errno || *end ||
			    v < QSM_MIN_CAP) {
				snprintf(err, errlen,
					 "qoslane_spool_max=%s: not a number of bytes >= %u",
					 num, QSM_MIN_CAP);
				return -1;
			}
			*cap = v;
		} else if (n > sizeof(k_dir) - 1 &&
			   !strncmp(w, k_dir, sizeof(k_dir) - 1)) {
			size_t m = n - (sizeof(k_dir) - 1);
			if (m >= dirlen || w[sizeof(k_dir) - 1] != '/') {
				snprintf(err, errlen,
					 "qoslane_spool: not an absolute path that fits");
				return -1;
			}
			memcpy(dir, w + sizeof(k_dir) - 1, m);
			dir[m] = 0;
		}
	}
	return 0;
}

/* The spool directory at s->dir, made (0755, one level) when missing, opened
 * (never through a symlink) and judged: ours or root's, not writable by group
 * or others unless sticky. Its descriptor, or -1 with a message in err. */
static int open_dir(const struct qsm_spool *s, char *err, size_t errlen)
{
	if (mkdir(s->dir, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", s->dir, strerror(errno));
		return -1;
	}
	int fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "open %s: %s", s->dir, strerror(errno));
		return -1;
	}
	struct stat d;
	if (fstat(fd, &d) || (d.st_uid != geteuid() && d.st_uid != 0) ||
	    ((d.st_mode & (S_IWGRP | S_IWOTH)) && !(d.st_mode & S_ISVTX))) {
		snprintf(err, errlen,
			 "%s: not ours, or writable by others (want 0755, ours or root's)",
			 s->dir);
		close(fd);
		return -1;
	}
	return fd;
}

/* The directory was removed (systemd-tmpfiles, an admin's rm -rf): its
 * descriptor names a directory no one reads, where no file can be made. Make
 * and open the one at the path again, in its place (dup3: atomic for every
 * thread's fstatat). 0, or -1 (still gone, or not one to write to). */
static int follow_dir(struct qsm_spool *s)
{
	struct stat d;
	if (fstat(s->dirfd, &d) || d.st_nlink > 0)
		return -1;
	char err[64 + PATH_MAX];
	int fd = open_dir(s, err, sizeof(err));
	if (fd < 0)
		return -1;
	int rc = dup3(fd, s->dirfd, O_CLOEXEC) < 0 ? -1 : 0;
	close(fd);
	return rc;
}

/* A new spool file in place of the current one (the reader renamed it away,
 * or it was never there). 0, or -1 (the caller keeps writing to the old one). */
static int start_file(struct qsm_spool *s)
{
	int flags = O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = openat(s->dirfd, QSM_SPOOL_FILE, flags, 0640);
	if (fd < 0 && errno == ENOENT && follow_dir(s) == 0)
		fd = openat(s->dirfd, QSM_SPOOL_FILE, flags, 0640);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -1;
	}
	if (s->fd < 0) {
		s->fd = fd;
	} else {
		/* atomic for every thread writing to s->fd: the old file or the new */
		if (dup3(fd, s->fd, O_CLOEXEC) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		atomic_fetch_add(&s->reopened, 1);
	}
	atomic_store(&s->reserved, (uint64_t)st.st_size);
	atomic_store(&s->ino, (uint64_t)st.st_ino);
	atomic_store(&s->marked_ino, 0); /* a new file gets its own marker */
	return 0;
}

/* The file records go to (its inode), a new one started when the reader
 * took the old one. -1 when there is no file to write to. */
static int current(struct qsm_spool *s, uint64_t *ino)
{
	struct stat st;
	if (fstatat(s->dirfd, QSM_SPOOL_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && (uint64_t)st.st_ino == atomic_load(&s->ino)) {
		*ino = (uint64_t)st.st_ino;
		return 0;
	}
	if (pthread_mutex_trylock(&s->reopen) == 0) {
		int rc = start_file(s);
		*ino = atomic_load(&s->ino);
		pthread_mutex_unlock(&s->reopen);
		if (rc == 0)
			return 0;
	}
	/* another thread is starting the new file, or it cannot be: the old one */
	if (s->fd < 0 || fstat(s->fd, &st))
		return -1;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

static int put(struct qsm_spool *s, struct qsm_record *r)
{
	unsigned char b[QSM_RECORD_SIZE];
	r->instance = s->instance;
	r->dropped = atomic_load(&s->dropped);
	qsm_encode(r, b);
	ssize_t n = write(s->fd, b, sizeof(b));
	if (n != (ssize_t)sizeof(b))
		return -1;
	atomic_fetch_add(&s->written, 1);
	return 0;
}

void qsm_spool_emit(struct qsm_spool *s, struct qsm_record *r)
{
	uint64_t ino;
	r->seq = atomic_fetch_add(&s->seq, 1) + 1;
	r->time_ns = now_ns();
	if (current(s, &ino)) {
		atomic_fetch_add(&s->dropped, 1);
		return;
	}
	/* a place in the file before the write: threads racing never pass the
	 * cap; the last record's place is the OVERFLOW marker's */
	uint64_t at = atomic_fetch_add(&s->reserved, QSM_RECORD_SIZE);
	if (at + 2 * QSM_RECORD_SIZE <= s->cap) {
		if (put(s, r))
			atomic_fetch_add(&s->dropped, 1);
		return;
	}
	atomic_fetch_add(&s->dropped, 1);
	if (atomic_exchange(&s->marked_ino, ino) != ino) {
		struct qsm_record m = { .kind = QSM_OVERFLOW };
		m.seq = atomic_fetch_add(&s->seq, 1) + 1;
		m.time_ns = r->time_ns;
		m.block = (uint32_t)r->kind; /* the first kind dropped */
		if (put(s, &m))
			atomic_fetch_add(&s->dropped, 1);
	}
}

int qsm_spool_open(struct qsm_spool *s, const char *dir, uint64_t cap,
		   char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->cap = cap;
	pthread_mutex_init(&s->reopen, NULL);
	if (getrandom(&s->instance, sizeof(s->instance), GRND_NONBLOCK) !=
	    sizeof(s->instance))
		s->instance = now_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->dirfd = open_dir(s, err, errlen);
	if (s->dirfd < 0)
		return -1;
	if (start_file(s)) {
		snprintf(err, errlen, "open %s/%s: %s (a regular file of ours?)",
			 dir, QSM_SPOOL_FILE, strerror(errno));
		close(s->dirfd);
		return -1;
	}
	struct qsm_record r = { .kind = QSM_START };
	qsm_spool_emit(s, &r);
	return 0;
}

void qsm_spool_close(struct qsm_spool *s)
{
	struct qsm_record r = { .kind = QSM_STOP };
	qsm_spool_emit(s, &r);
	if (s->fd >= 0)
		close(s->fd);
	close(s->dirfd);
	pthread_mutex_destroy(&s->reopen);
}
