/* The sandbox ("pause") container of the harness's real node: holds a pod's namespaces, reaps
 * the children a shared PID namespace hands it, and exits on TERM or INT. Built static by
 * node.sh (no registry to pull one from). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = quit}, child = {.sa_handler = reap};
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGINT, &stop, NULL);
  child.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
  return 0;
}
