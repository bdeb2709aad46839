/* qsm-dump - print a qoslane_sm spool file, one record a line:
 *   seq=N kind=NAME time_ns=T instance=HEX guid=0xHEX block=B lft_top=L flags=F dropped=D
 * A stretch of bytes that is not a valid record prints "bad offset=O" and is
 * skipped to the next valid record (a reader does a full audit then). Reads
 * the first 16 MiB of the file (a qoslane_spool_max above that: the rest unread). */
#include <stdio.h>
#include <string.h>

#include "../src/record.h"

static const char *kind_name(unsigned k)
{
	switch (k) {
	case QSM_SUBNET_UP: return "SUBNET_UP";
	case QSM_HEAVY_SWEEP_START: return "HEAVY_SWEEP_START";
	case QSM_HEAVY_SWEEP_DONE: return "HEAVY_SWEEP_DONE";
	case QSM_UCAST_ROUTING_DONE: return "UCAST_ROUTING_DONE";
	case QSM_STATE_CHANGE: return "STATE_CHANGE";
	case QSM_LFT_CHANGE: return "LFT_CHANGE";
	case QSM_SA_DB_DUMPED: return "SA_DB_DUMPED";
	case QSM_TRAP: return "TRAP";
	case QSM_START: return "START";
	case QSM_OVERFLOW: return "OVERFLOW";
	case QSM_STOP: return "STOP";
	default: return "UNKNOWN";
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: qsm-dump SPOOL_FILE\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	static unsigned char buf[1 << 24];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	size_t off = 0;
	int bad = 0;
	while (off + QSM_RECORD_SIZE <= len) {
		struct qsm_record r;
		if (qsm_decode(buf + off, &r)) {
			if (!bad)
				printf("bad offset=%zu\n", off);
			bad = 1;
			off++;
			continue;
		}
		bad = 0;
		printf("seq=%llu kind=%s time_ns=%llu instance=%016llx guid=0x%016llx "
		       "block=%u lft_top=%u flags=%u dropped=%llu\n",
		       (unsigned long long)r.seq, kind_name(r.kind),
		       (unsigned long long)r.time_ns, (unsigned long long)r.instance,
		       (unsigned long long)r.guid, r.block, r.lft_top, r.flags,
		       (unsigned long long)r.dropped);
		off += QSM_RECORD_SIZE;
	}
	if (off < len)
		printf("bad offset=%zu torn=%zu\n", off, len - off);
	return 0;
}
