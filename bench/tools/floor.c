/* bench/tools/floor.c — the least a compiled hook with qoslane's guarantees
 * does, for bench/yardstick.sh --floor: not qoslane, a yardstick of what the
 * machine charges. The same job as bench/min-prolog.sh (the QoS from
 * SLURM_JOB_QOS, the level's setting, the env file, a log line), plus what
 * qoslane's Prolog and Epilog guarantee and the shell does not: the node
 * lock (flock), the journal (written and renamed into /run before the
 * setting, removed after), the setting verified (read back), the job's
 * record (renamed into place), the audit line made durable (fdatasync) and
 * the metrics textfile replaced (rename). No mapping, no checks, no trust
 * walks, no counters: what is left is process start, these syscalls and
 * the flush. Paths under HAND_ROOT, as the shell Prolog's.
 *
 *   gcc -O2 -o floor bench/tools/floor.c   (dynamic glibc, as a package is)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static const char *root;

static void path(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", root, rel); }

static int write_file(const char *rel, const char *text, int flags) {
  char p[4096];
  path(p, sizeof p, rel);
  int fd = open(p, O_WRONLY | O_CLOEXEC | flags, 0644);
  if (fd < 0) return -1;
  ssize_t len = (ssize_t)strlen(text);
  int ok = write(fd, text, (size_t)len) == len;
  close(fd);
  return ok ? 0 : -1;
}

/* tmp then rename: a reader sees the old file or the new one */
static int replace(const char *rel, const char *text) {
  char tmp[4096], dst[4096], reltmp[1024];
  snprintf(reltmp, sizeof reltmp, "%s.tmp.%d", rel, (int)getpid());
  if (write_file(reltmp, text, O_CREAT | O_EXCL) != 0) return -1;
  path(tmp, sizeof tmp, reltmp);
  path(dst, sizeof dst, rel);
  return rename(tmp, dst);
}

static int verify(const char *rel, const char *want) {
  char p[4096], got[64];
  path(p, sizeof p, rel);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, got, sizeof got - 1);
  close(fd);
  if (n < 0) return -1;
  got[n] = 0;
  return strcmp(got, want) == 0 ? 0 : -1;
}

static int audit(const char *line) {
  char p[4096];
  path(p, sizeof p, "var/log/qos-floor.jsonl");
  int fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return -1;
  ssize_t len = (ssize_t)strlen(line);
  /* FLOOR_NO_SYNC: the same without the flush, to weigh it */
  int ok = write(fd, line, (size_t)len) == len && (getenv("FLOOR_NO_SYNC") || fdatasync(fd) == 0);
  close(fd);
  return ok ? 0 : -1;
}

int main(void) {
  root = getenv("HAND_ROOT") ? getenv("HAND_ROOT") : "";
  const char *job = getenv("SLURM_JOB_ID"), *ctx = getenv("SLURM_SCRIPT_CONTEXT");
  const char *qos = getenv("SLURM_JOB_QOS") ? getenv("SLURM_JOB_QOS") : "";
  if (!job || !ctx) return 64;
  int prolog = strcmp(ctx, "prolog_slurmd") == 0;
  const char *tos = strcmp(qos, "mission-critical") == 0 ? "106\n" : strcmp(qos, "high") == 0 ? "74\n" : NULL;
  int sl = strcmp(qos, "mission-critical") == 0 ? 3 : strcmp(qos, "high") == 0 ? 2 : 1;
  const char *setting = "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos";
  char base[16], rec[256], line[512], text[256];
  snprintf(base, sizeof base, "%s\n", getenv("HAND_BASE_TOS") ? getenv("HAND_BASE_TOS") : "0");
  snprintf(rec, sizeof rec, "run/qos-prolog/%s", job);

  char lockp[4096];
  path(lockp, sizeof lockp, "run/qos-prolog/.lock");
  int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) return 1;
  const char *value = prolog ? tos : base;
  if (value) {
    snprintf(text, sizeof text, "{\"job\":%s,\"setting\":\"%s\",\"old\":\"%s\"}\n", job, setting, base);
    if (replace("run/qos-prolog/.journal", text) != 0) return 1;
    if (write_file(setting, value, O_TRUNC) != 0 || verify(setting, value) != 0) return 1;
  }
  if (prolog) {
    snprintf(text, sizeof text, "UCX_IB_SL=%d NCCL_IB_SL=%d\n", sl, sl);
    if (replace(rec, text) != 0) return 1;
  } else {
    char p[4096];
    path(p, sizeof p, rec);
    unlink(p);
  }
  if (value) {
    char j[4096];
    path(j, sizeof j, "run/qos-prolog/.journal");
    unlink(j);
  }
  close(lock);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(line, sizeof line, "{\"time\":%lld,\"event\":\"%s\",\"job\":%s,\"qos\":\"%s\",\"sl\":%d}\n",
           (long long)now.tv_sec, prolog ? "prolog" : "epilog", job, qos, sl);
  if (audit(line) != 0) return 1;
  snprintf(text, sizeof text, "qos_floor_runs_total{event=\"%s\"} 1\n", prolog ? "prolog" : "epilog");
  return replace("var/lib/qos-floor.prom", text) == 0 ? 0 : 1;
}
