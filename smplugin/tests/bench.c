/* bench.c - the plugin's cost per event: N LFT_CHANGE events through
 * qsm_report (translate, fstatat, write) into a spool under TMPDIR (use a tmpfs:
 * /run or /dev/shm, where the plugin's spool belongs), the file taken away
 * (renamed) every 8192 records as a reader would. Prints ns per event. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <opensm/osm_event_plugin.h>
#include <opensm/osm_node.h>
#include <opensm/osm_switch.h>

#include "../src/plugin.h"

static void quiet(void *ctx, int error, const char *msg)
{
	if (error)
		fprintf(stderr, "bench: %s\n", msg);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	char dir[256], opt[400], from[400], to[400], cmd[300];
	snprintf(dir, sizeof(dir), "%s/qsm-bench.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/dev/shm");
	if (!mkdtemp(dir))
		return 1;
	snprintf(opt, sizeof(opt), "qoslane_spool=%s/spool", dir);
	void *s = qsm_create_with(opt, quiet, NULL);
	if (!s)
		return 1;
	snprintf(from, sizeof(from), "%s/spool/events", dir);
	snprintf(to, sizeof(to), "%s/spool/taken", dir);
	osm_node_t node = { 0 };
	osm_switch_t sw = { 0 };
	sw.p_node = &node;
	osm_epi_lft_change_event_t e = { .p_sw = &sw, .flags = LFT_CHANGED_BLOCK };
	double spent = 0;
	for (long i = 0; i < n; i++) {
		if (i % 8192 == 0)
			rename(from, to);
		node.node_info.node_guid = (ib_net64_t)i;
		e.block_num = (uint32_t)(i % 48);
		double t0 = now();
		qsm_report(s, OSM_EVENT_ID_LFT_CHANGE, &e);
		spent += now() - t0;
	}
	struct qsm_spool *sp = s;
	printf("bench: %ld events, %.0f ns per event, %llu written, %llu dropped\n",
	       n, spent / n, (unsigned long long)atomic_load(&sp->written),
	       (unsigned long long)atomic_load(&sp->dropped));
	qsm_delete_with(s, quiet, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
