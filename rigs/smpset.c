/*
 * smpset - the fault lever of rigs/fabric_path_rig.sh: write one switch
 * port's SL2VL entry, or zero one VL's weight in a port's VL arbitration
 * tables, with SMP Set, behind the Subnet Manager's back (OpenSM never reads
 * the tables back, so it does not notice).  On the simulator only: ibsim
 * checks no M_Key and OpenSM's default M_Key is 0.
 *
 *   smpset sl2vl-entry LID OUT SL VL   every in port of OUT (0..NumPorts);
 *                                      an HCA (one table): OUT 0
 *   smpset vlarb-zero  LID PORT VL     weight 0 for VL in the low and the
 *                                      high table (first block of each)
 *   smpset dump        LID [LID...]    read every table of each node, one
 *                                      Get at a time (the floor an audit's
 *                                      reads are measured against)
 *
 * Each Set is read back with a Get and printed; exit 1 on any failure.
 * Built by the rig against the runtime libibmad.so.5 (no -dev package on
 * the host): the few declarations it needs follow libibmad's mad.h ABI.
 * Run it inside the simulator: SIM_HOST=node LD_PRELOAD=libumad2sim.so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libibmad's ib_portid_t (mad.h), LID-routed use only. */
typedef struct {
	int cnt;
	uint8_t p[64];
	uint16_t drslid;
	uint16_t drdlid;
} dr_path;
typedef struct {
	int lid;
	dr_path drpath;
	int grh_present;
	uint8_t gid[16];
	uint32_t qp;
	uint32_t qkey;
	uint8_t sl;
	unsigned pkey_idx;
} portid;
struct ibmad_port;
struct ibmad_port *mad_rpc_open_port(char *dev, int port, int *classes, int n);
uint8_t *smp_query_via(void *buf, portid *id, unsigned attr, unsigned mod,
		       unsigned timeout, const struct ibmad_port *via);
uint8_t *smp_set_via(void *buf, portid *id, unsigned attr, unsigned mod,
		     unsigned timeout, const struct ibmad_port *via);

enum { NODE_INFO = 0x11, PORT_INFO = 0x15, SL_TO_VL = 0x17, VL_ARB = 0x18 };
enum { VLARB_LOW_BLOCK1 = 1, VLARB_HIGH_BLOCK1 = 3 };

static struct ibmad_port *via;
static portid target;

static void die(const char *what)
{
	fprintf(stderr, "smpset: %s (lid %d)\n", what, target.lid);
	exit(1);
}

static int arg(const char *s, int max)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0 || v > max) {
		fprintf(stderr, "smpset: `%s` is not a number 0..%d\n", s, max);
		exit(2);
	}
	return (int)v;
}

/* NumPorts of a switch; 0 for an HCA (one table). */
static int switch_ports(void)
{
	uint8_t ni[64] = { 0 };
	if (!smp_query_via(ni, &target, NODE_INFO, 0, 0, via))
		die("NodeInfo Get failed");
	return ni[2] == 2 ? ni[3] : 0;
}

/* SL2VL: 16 nibbles, SL 0 in the high nibble of byte 0. */
static void sl2vl_entry(int out, int sl, int vl)
{
	int n = switch_ports(), in;
	for (in = 0; in <= n; in++) {
		uint8_t t[64] = { 0 }, b[64] = { 0 };
		unsigned mod = n ? (unsigned)(in << 8 | out) : 0;
		int i;
		if (!smp_query_via(t, &target, SL_TO_VL, mod, 0, via))
			die("SL2VL Get failed");
		if (sl % 2 == 0)
			t[sl / 2] = (uint8_t)((t[sl / 2] & 0x0f) | vl << 4);
		else
			t[sl / 2] = (uint8_t)((t[sl / 2] & 0xf0) | vl);
		memcpy(b, t, 8);
		if (!smp_set_via(b, &target, SL_TO_VL, mod, 0, via))
			die("SL2VL Set failed");
		memset(t, 0, sizeof t);
		if (!smp_query_via(t, &target, SL_TO_VL, mod, 0, via))
			die("SL2VL Get (read back) failed");
		printf("lid %d in %d out %d: SL2VL", target.lid, n ? in : 0, n ? out : 0);
		for (i = 0; i < 16; i++)
			printf(" %d", i % 2 ? t[i / 2] & 0x0f : t[i / 2] >> 4);
		printf("\n");
	}
}

/* VLArb block: 32 entries of (VL in the low nibble of byte 0, weight). */
static void vlarb_zero(int port, int vl)
{
	int blocks[2] = { VLARB_LOW_BLOCK1, VLARB_HIGH_BLOCK1 }, k, i;
	for (k = 0; k < 2; k++) {
		uint8_t t[64] = { 0 };
		unsigned mod = (unsigned)(blocks[k] << 16 | port);
		if (!smp_query_via(t, &target, VL_ARB, mod, 0, via))
			die("VLArb Get failed");
		for (i = 0; i < 32; i++)
			if ((t[2 * i] & 0x0f) == vl)
				t[2 * i + 1] = 0;
		if (!smp_set_via(t, &target, VL_ARB, mod, 0, via))
			die("VLArb Set failed");
		memset(t, 0, sizeof t);
		if (!smp_query_via(t, &target, VL_ARB, mod, 0, via))
			die("VLArb Get (read back) failed");
		printf("lid %d port %d %s:", target.lid, port, k ? "high" : "low");
		for (i = 0; i < 8; i++)
			printf(" %d:%d", t[2 * i] & 0x0f, t[2 * i + 1]);
		printf("\n");
	}
}

/* The floor of a fabric read: every table of every node in LIDS, one Get at
 * a time in this one process (NodeInfo; per port: every (in,out) SL2VL row,
 * PortInfo, the first low and high VLArb block). Prints the count and the
 * time on stdout: `dump: N SMPs, M failed, S.SSS s`. */
static void dump(int n, char **lids)
{
	struct timespec t0, t1;
	long smps = 0, failed = 0;
	uint8_t b[64];
	int a, np, in, out, blk;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (a = 0; a < n; a++) {
		target.lid = arg(lids[a], 0xbfff);
		memset(b, 0, sizeof b);
		smps++;
		if (!smp_query_via(b, &target, NODE_INFO, 0, 0, via)) {
			failed++;
			continue;
		}
		np = b[2] == 2 ? b[3] : 0;
		for (out = np ? 1 : 0; out <= np; out++) {
			int port = np ? out : 1;
			for (in = 0; in <= np; in++) {
				smps++;
				failed += !smp_query_via(b, &target, SL_TO_VL, (in << 8) | out, 0, via);
			}
			smps++;
			failed += !smp_query_via(b, &target, PORT_INFO, port, 0, via);
			for (blk = VLARB_LOW_BLOCK1; blk <= VLARB_HIGH_BLOCK1; blk += 2) {
				smps++;
				failed += !smp_query_via(b, &target, VL_ARB, (blk << 16) | port, 0, via);
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("dump: %ld SMPs, %ld failed, %.3f s\n", smps, failed,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}

int main(int argc, char **argv)
{
	int classes[2] = { 0x1, 0x81 };
	if (argc < 2)
		goto usage;
	if (strcmp(argv[1], "sl2vl-entry") == 0 && argc == 6) {
		target.lid = arg(argv[2], 0xbfff);
		if (!(via = mad_rpc_open_port(NULL, 0, classes, 2)))
			die("cannot open the local port");
		sl2vl_entry(arg(argv[3], 254), arg(argv[4], 15), arg(argv[5], 15));
		return 0;
	}
	if (strcmp(argv[1], "vlarb-zero") == 0 && argc == 5) {
		target.lid = arg(argv[2], 0xbfff);
		if (!(via = mad_rpc_open_port(NULL, 0, classes, 2)))
			die("cannot open the local port");
		vlarb_zero(arg(argv[3], 254), arg(argv[4], 14));
		return 0;
	}
	if (strcmp(argv[1], "dump") == 0 && argc >= 3) {
		if (!(via = mad_rpc_open_port(NULL, 0, classes, 2)))
			die("cannot open the local port");
		dump(argc - 2, argv + 2);
		return 0;
	}
usage:
	fprintf(stderr, "usage: smpset sl2vl-entry LID OUT SL VL\n"
			"       smpset vlarb-zero  LID PORT VL\n"
			"       smpset dump        LID [LID...]\n");
	return 2;
}
