/* LD_PRELOAD shim for disk-fault tests (issue 17): once the file named by KGROUP_FAULT_TRIGGER
 * exists, calls on descriptors of files under KGROUP_FAULT_DIR fail with errno KGROUP_FAULT_ERRNO
 * (default EIO). KGROUP_FAULT_OPS picks which: "sync" (fsync, fdatasync, syncfs) or "write"
 * (write, pwrite, writev and the syncs). The broker's code is not touched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static int faulty(int fd, int is_write) {
    const char *dir = getenv("KGROUP_FAULT_DIR"), *trigger = getenv("KGROUP_FAULT_TRIGGER");
    const char *ops = getenv("KGROUP_FAULT_OPS");
    if (!dir || !trigger || (is_write && !(ops && strcmp(ops, "write") == 0)))
        return 0;
    if (access(trigger, F_OK) != 0)
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    if (strncmp(path, dir, strlen(dir)) != 0)
        return 0;
    const char *e = getenv("KGROUP_FAULT_ERRNO");
    errno = e ? atoi(e) : EIO;
    return 1;
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    if (faulty(fd, 1)) return -1;
    return real(fd, buf, count);
}
ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
    REAL(pwrite);
    if (faulty(fd, 1)) return -1;
    return real(fd, buf, count, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off) {
    REAL(pwrite64);
    if (faulty(fd, 1)) return -1;
    return real(fd, buf, count, off);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(writev);
    if (faulty(fd, 1)) return -1;
    return real(fd, iov, cnt);
}
int fsync(int fd) {
    REAL(fsync);
    if (faulty(fd, 0)) return -1;
    return real(fd);
}
int fdatasync(int fd) {
    REAL(fdatasync);
    if (faulty(fd, 0)) return -1;
    return real(fd);
}
int syncfs(int fd) {
    REAL(syncfs);
    if (faulty(fd, 0)) return -1;
    return real(fd);
}
