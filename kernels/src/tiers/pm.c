/* pm.c — tier `pm:PATH`: the file copied into directory PATH and mmap'd from
 * there. On an fsdax mount (Optane in App Direct mode) loads go straight to
 * persistent memory; on any other filesystem this is an emulation at
 * page-cache (DRAM) speed, and the report says so. The copy is unlinked as
 * soon as it is mapped, so nothing is left behind even if the process dies. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "tiers.h"

static const char *tl_fs_name(long type) {
    switch ((unsigned long)type) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x01021994: return "tmpfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x858458f6: return "ramfs";
    case 0x2fc12fc1: return "zfs";
    case 0xF2F52010: return "f2fs";
    default: return "an unknown filesystem";
    }
}

/* Does the mount holding `dir` have the dax option? Longest mount point that
 * is a prefix of the real path, from /proc/self/mountinfo. */
static int tl_has_dax(const char *dir, char *mnt, size_t mntlen) {
    char real[PATH_MAX];
    if (!realpath(dir, real)) return 0;
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return 0;
    char line[4096];
    size_t best = 0;
    int dax = 0;
    while (fgets(line, sizeof line, f)) {
        char point[PATH_MAX], opts[1024];
        /* id parent major:minor root mountpoint options ... - fstype source superopts */
        if (sscanf(line, "%*s %*s %*s %*s %4095s %1023s", point, opts) != 2) continue;
        size_t pl = strlen(point);
        int prefix = strncmp(real, point, pl) == 0 &&
                     (real[pl] == '/' || real[pl] == 0 || (pl == 1 && point[0] == '/'));
        if (!prefix || pl < best) continue;
        best = pl;
        const char *super = strstr(line, " - ");
        dax = strstr(opts, "dax") != NULL || (super && strstr(super, "dax") != NULL);
        snprintf(mnt, mntlen, "%s", point);
    }
    fclose(f);
    return dax;
}

static atomic_uint tl_pm_seq;

static int tl_pm_place(const char *path, const char *arg, tl_region *r, char *err,
                       size_t errlen) {
    struct stat st, src;
    if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (err) snprintf(err, errlen, "pm:%s: not an existing directory", arg);
        return TIERLAB_EINVAL;
    }
    if (stat(path, &src) != 0) {
        if (err) snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        return TIERLAB_EIO;
    }
    struct statfs fs;
    const char *fsname = statfs(arg, &fs) == 0 ? tl_fs_name((long)fs.f_type) : "an unknown filesystem";
    char mnt[PATH_MAX] = "?";
    int dax = tl_has_dax(arg, mnt, sizeof mnt);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char dst[PATH_MAX];
    snprintf(dst, sizeof dst, "%s/tierlab-%ld-%u-%s", arg, (long)getpid(),
             atomic_fetch_add(&tl_pm_seq, 1), base);
    int fd = open(dst, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (err) snprintf(err, errlen, "pm:%s: cannot create %s: %s", arg, dst, strerror(errno));
        return TIERLAB_EIO;
    }
    size_t len = (size_t)src.st_size;
    int rc = 0;
    if (len && ftruncate(fd, (off_t)len) != 0) rc = TIERLAB_EIO;
    void *w = rc || !len ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (len && w == MAP_FAILED) {
        if (err) snprintf(err, errlen, "pm:%s: cannot size or map %s: %s", arg, dst, strerror(errno));
        close(fd);
        unlink(dst);
        return TIERLAB_EIO;
    }
    if (len) {
        rc = tl_copy_into(path, w, len, err, errlen);
        if (!rc && msync(w, len, MS_SYNC) != 0) rc = TIERLAB_EIO;
        munmap(w, len);
    }
    void *m = rc || !len ? MAP_FAILED : mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    unlink(dst);
    if (rc) return rc;
    if (len && m == MAP_FAILED) {
        if (err) snprintf(err, errlen, "pm:%s: cannot mmap %s: %s", arg, dst, strerror(errno));
        return TIERLAB_EIO;
    }
    r->map = len ? m : NULL;
    r->map_len = len;
    r->data = len ? m : (const uint8_t *)"";
    r->len = len;
    r->rep.resident_bytes = len ? tl_resident_bytes(m, len) : 0;
    r->rep.honoured = 1;
    if (dax)
        snprintf(r->rep.detail, sizeof r->rep.detail,
                 "pm on an fsdax mount (%s, dax, mount %s) at %s: copied and mmap'd, loads go "
                 "to persistent memory",
                 fsname, mnt, arg);
    else
        snprintf(r->rep.detail, sizeof r->rep.detail,
                 "pm emulated on %s at %s (mount %s has no dax option: page-cache DRAM speed); "
                 "copied, mmap'd (MAP_POPULATE), copy unlinked once mapped; %.1f%% resident",
                 fsname, arg, mnt,
                 len ? 100.0 * (double)r->rep.resident_bytes / (double)len : 100.0);
    return 0;
}

const tl_tier tl_tier_pm = {"pm", 1, tl_pm_place};
