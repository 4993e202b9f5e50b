// benchtool: the guest side of the VM benchmarks (tests/bench/run, tests/vm/guest/bench.sh).
// Static, no libc beyond syscalls, so its own cost is near zero under TCG.
//
//   benchtool time [--fixed-addresses] OUTFILE CMD [ARG...]
//                                         run CMD (stdout+stderr to OUTFILE), print "<ms> <exit>";
//                                         --fixed-addresses: CMD runs without address-space
//                                         randomization (personality(2) ADDR_NO_RANDOMIZE), so
//                                         its code loads where it loaded the run before
//   benchtool writes FILE                 the physical limit: one process doing the sysfs writes
//                                         listed in FILE ("PATH VALUE" a line; no VALUE writes
//                                         "\n"), one open+write+close each, in order
//   benchtool agent STATUS BDF DRIVER N   agent latency: N times, unbind BDF from DRIVER and bind
//                                         it again (an external rebind), then wait until the agent
//                                         replaces STATUS with a document that shows BDF on
//                                         DRIVER; prints one "<latency> <writes>" in ms a
//                                         line (<writes>: the unbind and bind writes alone)
//   benchtool ctxsw PID                   voluntary + involuntary context switches of every
//                                         thread of PID (its wake-ups)
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int writeAttr(const char* path, const char* value) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t n = strlen(value);
  ssize_t w = write(fd, value, n);
  int e = w < 0 ? errno : ((size_t)w == n ? 0 : EIO);
  close(fd);
  return e;
}

static int cmdTime(int argc, char** argv) {
  int fixed = argc > 0 && !strcmp(argv[0], "--fixed-addresses");
  argc -= fixed;
  argv += fixed;
  if (argc < 2) return 2;
  double t0 = nowMs();
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    if (fixed && personality(ADDR_NO_RANDOMIZE) < 0) _exit(126);
    int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  double t1 = nowMs();
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  printf("%.3f %d\n", t1 - t0, rc);
  return 0;
}

static int cmdWrites(const char* file) {
  FILE* f = fopen(file, "r");
  if (!f) {
    perror(file);
    return 2;
  }
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    char* sp = strchr(line, ' ');
    const char* value = "\n";
    if (sp) {
      *sp = 0;
      if (sp[1]) value = sp + 1;
    }
    int e = writeAttr(line, value);
    if (e) {
      fprintf(stderr, "%s <- '%s': %s\n", line, value, strerror(e));
      fclose(f);
      return 1;
    }
  }
  fclose(f);
  return 0;
}

// Does the status document show BDF bound to DRIVER? The document lists each function as an
// object with "bdf" first and "driver" after it; look at the text between this bdf and the next.
static int showsDriver(const char* path, const char* bdf, const char* driver) {
  static char buf[1 << 20];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char key[64];
  snprintf(key, sizeof key, "\"bdf\":\"%s\"", bdf);
  char* at = strstr(buf, key);
  if (!at) {
    snprintf(key, sizeof key, "\"bdf\": \"%s\"", bdf);
    at = strstr(buf, key);
  }
  if (!at) return 0;
  char* end = strstr(at + 1, "\"bdf\"");
  if (end) *end = 0;
  char want[96], want2[96];
  snprintf(want, sizeof want, "\"driver\":\"%s\"", driver);
  snprintf(want2, sizeof want2, "\"driver\": \"%s\"", driver);
  return strstr(at, want) || strstr(at, want2);
}

static ino_t inodeOf(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_ino : 0;
}

static int cmpDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static int cmdAgent(const char* status, const char* bdf, const char* driver, int n) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", status);
  char* slash = strrchr(dir, '/');
  if (!slash) return 2;
  *slash = 0;
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, dir, IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    perror("inotify");
    return 2;
  }
  char unbind[256], bind[256];
  snprintf(unbind, sizeof unbind, "/sys/bus/pci/drivers/%s/unbind", driver);
  snprintf(bind, sizeof bind, "/sys/bus/pci/drivers/%s/bind", driver);
  double* lat = calloc((size_t)n, sizeof *lat);
  double* wr = calloc((size_t)n, sizeof *wr);
  char ev[4096];
  int missed = 0;
  for (int i = 0; i < n; ++i) {
    // Quiet first: no status write for 200 ms (a trailing publish of the last round is over).
    struct pollfd p = {in, POLLIN, 0};
    while (poll(&p, 1, 200) > 0) {
      while (read(in, ev, sizeof ev) > 0) {
      }
    }
    ino_t before = inodeOf(status);
    double t0 = nowMs();
    int e = writeAttr(unbind, bdf);
    if (!e) e = writeAttr(bind, bdf);
    wr[i] = nowMs() - t0;
    if (e) {
      fprintf(stderr, "rebind %s on %s: %s\n", bdf, driver, strerror(e));
      return 1;
    }
    double t = -1;
    while (nowMs() - t0 < 5000) {
      if (poll(&p, 1, 50) > 0) {
        while (read(in, ev, sizeof ev) > 0) {
        }
      }
      ino_t now = inodeOf(status);
      if (now != before && showsDriver(status, bdf, driver)) {
        t = nowMs() - t0;
        break;
      }
    }
    if (t < 0) {
      ++missed;
      t = 5000;
    }
    lat[i] = t;
    printf("%.3f %.3f\n", t, wr[i]);
  }
  qsort(lat, (size_t)n, sizeof *lat, cmpDouble);
  qsort(wr, (size_t)n, sizeof *wr, cmpDouble);
  fprintf(stderr,
          "agent: %d rebinds, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d missed; the writes alone "
          "p50 %.1f ms, p99 %.1f ms\n",
          n, lat[n / 2], lat[(n * 99 + 99) / 100 - 1], lat[n - 1], missed, wr[n / 2],
          wr[(n * 99 + 99) / 100 - 1]);
  return missed ? 1 : 0;
}

static int cmdCtxsw(const char* pid) {
  char path[512];
  snprintf(path, sizeof path, "/proc/%s/task", pid);
  DIR* d = opendir(path);
  if (!d) {
    perror(path);
    return 2;
  }
  long total = 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%s/task/%s/status", pid, e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    char line[256];
    long v;
    while (fgets(line, sizeof line, f)) {
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1) total += v;
      if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1) total += v;
    }
    fclose(f);
  }
  closedir(d);
  printf("%ld\n", total);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "time")) return cmdTime(argc - 2, argv + 2);
  if (argc == 3 && !strcmp(argv[1], "writes")) return cmdWrites(argv[2]);
  if (argc == 6 && !strcmp(argv[1], "agent")) return cmdAgent(argv[2], argv[3], argv[4], atoi(argv[5]));
  if (argc == 3 && !strcmp(argv[1], "ctxsw")) return cmdCtxsw(argv[2]);
  fprintf(stderr,
          "usage: benchtool time [--fixed-addresses] OUT CMD... | writes FILE | agent STATUS BDF DRIVER N | ctxsw PID\n");
  return 2;
}
