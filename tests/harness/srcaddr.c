/* LD_PRELOAD shim for the harness's Slinky pods: binds each outgoing IPv4 socket of the
 * process to $SLURMSCALE_SOURCE_ADDR before it connects.
 *
 * Every pod's slurmd shares the machine's loopback, and Slurm 24.11 takes a dynamic node's
 * NodeAddr from the source address of its registration, which on loopback is always
 * 127.0.0.1: without this, slurmctld would reach every pod at the same address. With it, a
 * pod is seen from the address its slurmd listens on, as a real pod is from its own IP. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *to, socklen_t len) {
  static connect_fn real;
  if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
  const char *src = getenv("SLURMSCALE_SOURCE_ADDR");
  struct sockaddr_in me;
  socklen_t mlen = sizeof(me);
  /* Only sockets that are not bound yet: a caller's own bind stands. */
  if (src && to && to->sa_family == AF_INET &&
      getsockname(fd, (struct sockaddr *)&me, &mlen) == 0 && me.sin_family == AF_INET &&
      me.sin_addr.s_addr == htonl(INADDR_ANY) && me.sin_port == 0) {
    memset(&me, 0, sizeof(me));
    me.sin_family = AF_INET;
    if (inet_pton(AF_INET, src, &me.sin_addr) == 1) {
      int saved = errno;
      (void)bind(fd, (struct sockaddr *)&me, sizeof(me));
      errno = saved;
    }
  }
  return real(fd, to, len);
}
