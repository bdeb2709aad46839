/* resident-client.c: the prototype's client (not shipped), the program
 * slurmd would start as Prolog/Epilog in front of a resident per-node
 * process (crates/qoslane/examples/resident_prototype.rs): it sends its
 * environment (NUL-separated, ended by an empty entry) to the socket
 * its argument names (else RESIDENT_SOCKET) and exits with the one byte of
 * status it gets back.
 * As small as a program can be: what a resident design's per-hook process
 * start costs at least. bench/resident.sh builds it (gcc -O2). */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("RESIDENT_SOCKET");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (!path || strlen(path) >= sizeof addr.sun_path) return 2;
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) return 3;
  static char buf[65536];
  size_t n = 0;
  for (char **e = environ; *e; e++) {
    size_t l = strlen(*e) + 1;
    if (n + l + 1 > sizeof buf) return 4;
    memcpy(buf + n, *e, l);
    n += l;
  }
  buf[n++] = 0;
  for (size_t off = 0; off < n;) {
    ssize_t w = write(fd, buf + off, n - off);
    if (w <= 0) return 5;
    off += (size_t)w;
  }
  unsigned char status;
  if (read(fd, &status, 1) != 1) return 6;
  return status;
}
