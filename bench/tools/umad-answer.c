/* bench/tools/umad-answer.c — a libibumad.so.3 for one measurement only:
 * what qoslane itself spends on a job's counter evidence, with the HCA's
 * part taken out. bench/counters_cost.sh builds it into a directory that
 * LD_LIBRARY_PATH puts first, so qoslane's dlopen("libibumad.so.3") finds
 * it instead of rdma-core's. It opens any port, registers any agent and
 * answers every Get at once, in process: the answer is the request with
 * the method GetResp (status 0, the data as sent: a PMA answer names the
 * PortSelect asked, every counter 0). No device, no sysfs, no kernel, no
 * simulator: what is left of a cycle is qoslane's own work (the dlopen,
 * its calls, its Gets and what it does with the answers).
 *
 * Not a test double for any test: the rig's umad preload (ibsim) is the
 * fabric the tests read. Only the entry points qoslane's umad.rs looks up.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define MAD_SIZE 256
#define HEADER 64 /* umad_size(): rdma-core's struct ib_user_mad is 64 bytes */
#define QUEUE 64

static unsigned char answers[QUEUE][MAD_SIZE];
static int head, count;

int umad_init(void) { return 0; }
int umad_open_port(const char *ca, int port) { (void)ca; (void)port; return 3; }
int umad_close_port(int fd) { (void)fd; count = 0; return 0; }
int umad_register(int fd, int mgmt_class, int version, uint8_t rmpp, long *mask)
{
	(void)fd; (void)version; (void)rmpp; (void)mask;
	return mgmt_class; /* an agent id per class */
}
size_t umad_size(void) { return HEADER; }
void *umad_get_mad(void *umad) { return (unsigned char *)umad + HEADER; }
int umad_set_addr(void *umad, int dlid, int qp, int sl, int qkey)
{
	(void)umad; (void)dlid; (void)qp; (void)sl; (void)qkey;
	return 0;
}
int umad_status(void *umad)
{
	int32_t s;
	memcpy(&s, (unsigned char *)umad + 4, sizeof s);
	return s;
}

int umad_send(int fd, int agent, void *umad, int length, int timeout_ms, int retries)
{
	(void)fd; (void)agent; (void)timeout_ms; (void)retries;
	if (count == QUEUE || length > MAD_SIZE)
		return -ENOMEM;
	unsigned char *a = answers[(head + count) % QUEUE];
	memcpy(a, (unsigned char *)umad + HEADER, (size_t)length);
	a[3] = 0x81; /* GetResp */
	a[4] = a[5] = 0;
	count++;
	return 0;
}

int umad_recv(int fd, void *umad, int *length, int timeout_ms)
{
	(void)fd; (void)timeout_ms;
	if (count == 0)
		return -ETIMEDOUT;
	memset(umad, 0, HEADER);
	memcpy((unsigned char *)umad + HEADER, answers[head], MAD_SIZE);
	*length = MAD_SIZE;
	head = (head + 1) % QUEUE;
	count--;
	return 0;
}
