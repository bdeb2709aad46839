/* record.h - the spool's record: 64 bytes, little-endian, fixed layout.
 * The format is specified in smplugin/README.md ("Record format"); a
 * change of layout bumps QSM_FORMAT and the reader refuses what it does not know. */
#ifndef QSM_RECORD_H
#define QSM_RECORD_H

#include <stdint.h>
#include <string.h>

#define QSM_MAGIC 0x4d534c51u /* "QLSM" as bytes */
#define QSM_FORMAT 1
#define QSM_RECORD_SIZE 64

/* Kinds: stable numbers of our own, not OpenSM's enum (which may grow). */
enum qsm_kind {
	QSM_SUBNET_UP = 1,
	QSM_HEAVY_SWEEP_START = 2,
	QSM_HEAVY_SWEEP_DONE = 3,
	QSM_UCAST_ROUTING_DONE = 4,
	QSM_STATE_CHANGE = 5,
	QSM_LFT_CHANGE = 6,
	QSM_SA_DB_DUMPED = 7,
	QSM_TRAP = 8,
	QSM_START = 64,    /* the plugin was loaded: nothing before it is known */
	QSM_OVERFLOW = 65, /* the file was full: records after it were dropped */
	QSM_STOP = 66,     /* the plugin was unloaded (the SM stopped) */
};

struct qsm_record {
	uint16_t kind;
	uint64_t seq;
	uint64_t instance;
	uint64_t time_ns;
	uint64_t guid;
	uint32_t block;
	uint16_t lft_top;
	uint8_t flags;
	uint8_t port;
	uint64_t dropped;
};

static inline void qsm_put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void qsm_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void qsm_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint16_t qsm_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t qsm_get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t qsm_get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* FNV-1a, 32 bits, over bytes 0..59. */
static inline uint32_t qsm_check(const unsigned char *b)
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < QSM_RECORD_SIZE - 4; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static inline void qsm_encode(const struct qsm_record *r,
			      unsigned char b[QSM_RECORD_SIZE])
{
	memset(b, 0, QSM_RECORD_SIZE);
	qsm_put32(b + 0, QSM_MAGIC);
	qsm_put16(b + 4, QSM_FORMAT);
	qsm_put16(b + 6, r->kind);
	qsm_put64(b + 8, r->seq);
	qsm_put64(b + 16, r->instance);
	qsm_put64(b + 24, r->time_ns);
	qsm_put64(b + 32, r->guid);
	qsm_put32(b + 40, r->block);
	qsm_put16(b + 44, r->lft_top);
	b[46] = r->flags;
	b[47] = r->port;
	qsm_put64(b + 48, r->dropped);
	qsm_put32(b + 60, qsm_check(b));
}

/* 0 when b holds a whole, valid record of our format; -1 otherwise. */
static inline int qsm_decode(const unsigned char b[QSM_RECORD_SIZE],
			     struct qsm_record *r)
{
	if (qsm_get32(b) != QSM_MAGIC || qsm_get16(b + 4) != QSM_FORMAT ||
	    qsm_get32(b + 60) != qsm_check(b))
		return -1;
	r->kind = qsm_get16(b + 6);
	r->seq = qsm_get64(b + 8);
	r->instance = qsm_get64(b + 16);
	r->time_ns = qsm_get64(b + 24);
	r->guid = qsm_get64(b + 32);
	r->block = qsm_get32(b + 40);
	r->lft_top = qsm_get16(b + 44);
	r->flags = b[46];
	r->port = b[47];
	r->dropped = qsm_get64(b + 48);
	return 0;
}

#endif
