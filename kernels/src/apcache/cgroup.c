/* cgroup.c — the DRAM limit of a real-device run (docs/apcache.md "The setting":
 * the reference capped the page cache with a cgroup v2 memory.max).
 *
 * tl_cgroup_enter finds this process's memory cgroup — v2 when the unified
 * hierarchy of /proc/self/cgroup ("0::/path") offers the memory controller,
 * else v1 (the "memory" line of /proc/self/cgroup, under the mount of a
 * cgroup filesystem with the memory option) — creates a child
 * `tierlab-<pid>` there and moves this process into it (all its threads).
 * Memory charged from then on (page cache of files read, anonymous memory)
 * counts against the child. tl_cgroup_limit writes memory.max (v2) or
 * memory.limit_in_bytes (v1). tl_cgroup_leave moves the process back to the
 * parent and removes the child; the Python side removes a `tierlab-<pid>`
 * left by a process that was killed. Anything that fails is reported as a
 * reason, never as an error: the run then goes on without a limit. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apcache.h"

static int tl_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    int ok = fputs(text, f) >= 0;
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && !e) e = errno;
    return e ? -e : 0;
}

static int tl_read_u64(const char *path, uint64_t *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    if (!strncmp(buf, "max", 3)) {
        *v = UINT64_MAX;
        return 0;
    }
    *v = strtoull(buf, NULL, 10);
    return 0;
}

/* Mount point of the cgroup filesystem: v2 (`cgroup2`) or the v1 one whose
 * super options include `memory`. */
static int tl_cgroup_mount(int version, char *mnt, size_t len) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return -1;
    char line[4096];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char *sep = strstr(line, " - ");
        if (!sep) continue;
        char fstype[64], source[256], opts[1024] = "";
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) < 2) continue;
        int want = version == 2 ? !strcmp(fstype, "cgroup2")
                                : !strcmp(fstype, "cgroup") && strstr(opts, "memory") != NULL;
        if (!want) continue;
        char point[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1) {
            snprintf(mnt, len, "%s", point);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* This process's cgroup path in hierarchy v2 ("0::") or v1 (":memory:"). */
static int tl_cgroup_self(int version, char *path, size_t len) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[4096];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrl = c1 + 1;
        int match = version == 2 ? !strncmp(line, "0:", 2) && !*ctrl
                                 : strstr(ctrl, "memory") != NULL;
        if (match) {
            snprintf(path, len, "%s", c2 + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

static int tl_cgroup_try(tl_cgroup *cg, int version, char *why, size_t whylen) {
    char mnt[PATH_MAX], self[PATH_MAX];
    const char *v = version == 2 ? "cgroup v2" : "cgroup v1";
    if (tl_cgroup_mount(version, mnt, sizeof mnt) || tl_cgroup_self(version, self, sizeof self)) {
        snprintf(why, whylen, "no %s memory hierarchy mounted", v);
        return -1;
    }
    snprintf(cg->parent, sizeof cg->parent, "%s%s", mnt, strcmp(self, "/") ? self : "");
    if (version == 2) {
        char ctl[PATH_MAX + 32], buf[512] = "";
        snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", cg->parent);
        FILE *f = fopen(ctl, "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
            fclose(f);
        }
        if (!strstr(buf, "memory")) {
            snprintf(why, whylen, "cgroup v2 at %s has no memory controller", cg->parent);
            return -1;
        }
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", cg->parent);
        tl_write_file(ctl, "+memory"); /* may already be on; checked below */
    }
    snprintf(cg->path, sizeof cg->path, "%s/tierlab-%ld", cg->parent, (long)getpid());
    if (mkdir(cg->path, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "%s: cannot create %s: %s", v, cg->path, strerror(errno));
        return -1;
    }
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/%s", cg->path,
             version == 2 ? "memory.max" : "memory.limit_in_bytes");
    struct stat st;
    if (stat(file, &st) != 0) {
        snprintf(why, whylen, "%s: %s has no memory limit file", v, cg->path);
        rmdir(cg->path);
        return -1;
    }
    char pid[32];
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    snprintf(file, sizeof file, "%s/cgroup.procs", cg->path);
    int e = tl_write_file(file, pid);
    if (e) {
        snprintf(why, whylen, "%s: cannot move the process into %s: %s", v, cg->path,
                 strerror(-e));
        rmdir(cg->path);
        return -1;
    }
    cg->version = version;
    cg->active = 1;
    return 0;
}

int tl_cgroup_enter(tl_cgroup *cg, char *why, size_t whylen) {
    memset(cg, 0, sizeof *cg);
    char why2[512] = "", why1[512] = "";
    if (tl_cgroup_try(cg, 2, why2, sizeof why2) == 0) return 0;
    if (tl_cgroup_try(cg, 1, why1, sizeof why1) == 0) return 0;
    snprintf(why, whylen, "%s; %s", why2, why1);
    return -1;
}

int tl_cgroup_limit(tl_cgroup *cg, uint64_t bytes, char *why, size_t whylen) {
    char file[PATH_MAX + 32], text[32];
    snprintf(file, sizeof file, "%s/%s", cg->path,
             cg->version == 2 ? "memory.max" : "memory.limit_in_bytes");
    snprintf(text, sizeof text, "%llu\n", (unsigned long long)bytes);
    int e = tl_write_file(file, text);
    if (e) snprintf(why, whylen, "cannot write %s: %s", file, strerror(-e));
    return e ? -1 : 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Larger mappings are left alone: a sanitizer's shadow (terabytes, reserved
 * rw-p and anonymous) or any other huge reservation, never the runtime's
 * arrays at the scales it runs. */
#define TL_POPULATE_MAX_MAPPING (1ull << 30)

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TL_POPULATE_OFF 1 /* their allocators and shadows: nothing to gain */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TL_POPULATE_OFF 1
#endif
#endif

/* Fault in every private anonymous writable mapping of the process (heap and
 * mmap'd allocations), for writing: memory allocated but not yet touched —
 * calloc'd per-term arrays of the vocabulary's size, touched term by term as
 * the run goes — is charged when touched, and would be taken from the page
 * cache under the limit (seen: 3.8 MB during a hybrid-prefetch run); and a
 * page first read maps the zero page, whose copy-on-write at the first write
 * flushes the TLB of every CPU running the process (runtime.c). Called before
 * any thread starts. Returns the bytes of the mappings populated; 0 when the
 * kernel cannot (before 5.14). */
uint64_t tl_populate_anon(void) {
#ifdef TL_POPULATE_OFF
    return 0;
#endif
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[4096];
    uint64_t done = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, z;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &z, perms, &path_at) < 3) continue;
        const char *path = path_at ? line + path_at : "";
        int anon = path[0] == '\n' || path[0] == 0 || !strncmp(path, "[heap]", 6);
        if (!anon || strcmp(perms, "rw-p") != 0 || z - a > TL_POPULATE_MAX_MAPPING) continue;
        if (madvise((void *)a, z - a, MADV_POPULATE_WRITE) == 0) done += z - a;
    }
    fclose(f);
    return done;
}

uint64_t tl_cgroup_usage(const tl_cgroup *cg) {
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/%s", cg->path,
             cg->version == 2 ? "memory.current" : "memory.usage_in_bytes");
    uint64_t v = 0;
    return tl_read_u64(file, &v) == 0 ? v : 0;
}

uint64_t tl_cgroup_peak(const tl_cgroup *cg) {
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/%s", cg->path,
             cg->version == 2 ? "memory.peak" : "memory.max_usage_in_bytes");
    uint64_t v = 0;
    return tl_read_u64(file, &v) == 0 ? v : 0;
}

void tl_cgroup_reset_peak(tl_cgroup *cg) {
    char file[PATH_MAX + 32];
    /* v1: writing 0 resets max_usage_in_bytes; v2 (memory.peak) resets only
     * per open file from Linux 6.12, so it is left as is (setup included). */
    if (cg->version != 1) return;
    snprintf(file, sizeof file, "%s/memory.max_usage_in_bytes", cg->path);
    tl_write_file(file, "0\n");
}

void tl_cgroup_leave(tl_cgroup *cg) {
    if (!cg->active) return;
    char file[PATH_MAX + 32], pid[32];
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    snprintf(file, sizeof file, "%s/cgroup.procs", cg->parent);
    tl_write_file(file, pid);
    /* The child may still hold charges (page cache) for a moment: retry. */
    for (int i = 0; i < 50 && rmdir(cg->path) != 0 && errno == EBUSY; i++) usleep(20000);
    cg->active = 0;
}

/* ---- the memory room (resource guards) ----------------------------------------- */

const char *tl_bytes_text(uint64_t b, char *buf, size_t len) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%llu bytes", (unsigned long long)b);
    else snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

/* `key` of a flat "key value" file (/proc/meminfo, memory.stat), or 0. */
static uint64_t tl_stat_value(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && (line[n] == ' ' || line[n] == ':' || line[n] == '\t')) {
            v = strtoull(line + n + 1 + strspn(line + n + 1, " \t:"), NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* The room a memory cgroup leaves: limit - (usage - inactive file pages, which
 * the kernel reclaims first); UINT64_MAX without a limit. */
static uint64_t tl_cgroup_room(const char *dir, int version, uint64_t *limit, uint64_t *used) {
    char file[PATH_MAX + 40];
    uint64_t lim = UINT64_MAX, use = 0;
    snprintf(file, sizeof file, "%s/%s", dir, version == 2 ? "memory.max" : "memory.limit_in_bytes");
    if (tl_read_u64(file, &lim) != 0) return UINT64_MAX;
    if (version == 1) { /* the effective limit of the hierarchy above, too */
        snprintf(file, sizeof file, "%s/memory.stat", dir);
        uint64_t h = tl_stat_value(file, "hierarchical_memory_limit");
        if (h && h < lim) lim = h;
    }
    if (lim >= (1ull << 60)) return UINT64_MAX; /* "max", or v1's page-rounded LONG_MAX */
    snprintf(file, sizeof file, "%s/%s", dir, version == 2 ? "memory.current" : "memory.usage_in_bytes");
    tl_read_u64(file, &use);
    snprintf(file, sizeof file, "%s/memory.stat", dir);
    uint64_t inactive = tl_stat_value(file, version == 2 ? "inactive_file" : "total_inactive_file");
    use = use > inactive ? use - inactive : 0;
    *limit = lim;
    *used = use;
    return lim > use ? lim - use : 0;
}

int tierlab_memory_room(uint64_t *bytes, char *how, size_t howlen) {
    if (!bytes) return TIERLAB_EINVAL;
    uint64_t kb = tl_stat_value("/proc/meminfo", "MemAvailable");
    uint64_t room = kb ? kb * 1024 : UINT64_MAX;
    char a[32], b[32];
    if (how && howlen)
        snprintf(how, howlen, kb ? "MemAvailable of /proc/meminfo" : "no MemAvailable in /proc/meminfo");
    for (int version = 2; version >= 1; version--) {
        char mnt[PATH_MAX], self[PATH_MAX], dir[2 * PATH_MAX];
        if (tl_cgroup_mount(version, mnt, sizeof mnt) || tl_cgroup_self(version, self, sizeof self))
            continue;
        /* this process's cgroup and, in v2, every ancestor below the root */
        snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(self, "/") ? self : "");
        for (;;) {
            uint64_t lim = 0, used = 0, r = tl_cgroup_room(dir, version, &lim, &used);
            if (r < room) {
                room = r;
                if (how && howlen)
                    snprintf(how, howlen, "cgroup v%d %s of %s: limit %s, %s in use", version,
                             version == 2 ? "memory.max" : "memory.limit_in_bytes", dir,
                             tl_bytes_text(lim, a, sizeof a), tl_bytes_text(used, b, sizeof b));
            }
            char *slash = strrchr(dir, '/');
            if (version == 1 || !slash || (size_t)(slash - dir) <= strlen(mnt)) break;
            *slash = 0;
        }
    }
    *bytes = room;
    return 0;
}

int tierlab_memory_guard(uint64_t planned, const char *what, const char *detail,
                         const char *hint, char *err, size_t errlen) {
    uint64_t room = 0;
    char how[PATH_MAX + 200], a[32], b[32];
    tierlab_memory_room(&room, how, sizeof how);
    if (planned <= room) return 0;
    return tl_err(err, errlen, TIERLAB_ENOMEM, "%s needs %s of memory%s%s%s, more than the %s "
                  "this machine has for it (%s)%s%s", what, tl_bytes_text(planned, a, sizeof a),
                  detail && *detail ? " (" : "", detail ? detail : "", detail && *detail ? ")" : "",
                  tl_bytes_text(room, b, sizeof b), how, hint && *hint ? "; " : "",
                  hint ? hint : "");
}
