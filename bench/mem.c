/* mem.c - the parts the memory-system modes share (mem.h). */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/mem.h"
#include "lib/api/probe.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Spins between yields: about 10-50 µs of pause instructions, far longer than any
 * cache-line hop, so a partner on another CPU is never yielded to by accident. */
#define SPINS_PER_YIELD 4096

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The CPUs that exist (configured, online or not): 0 .. n-1. */
static int cpus_configured(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	return n < 1 ? 1 : n > BENCH_MAX_CPUS ? BENCH_MAX_CPUS : (int)n;
}

/* A list without the allowed-set check, for SHMCOLL_CPUS itself. */
static int parse_list(const char *spec, struct bench_cpus *out, char *err, size_t errlen)
{
	const char *p = spec;
	char *end;
	long a, b, i;

	out->n = 0;
	while (*p) {
		errno = 0;
		a = strtol(p, &end, 10);
		if (end == p || errno || a < 0) {
			say(err, errlen, "bad CPU list '%s': expected numbers such as 0-3,8", spec);
			return -1;
		}
		b = a;
		p = end;
		if (*p == '-') {
			errno = 0;
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || errno || b < a) {
				say(err, errlen, "bad CPU range in '%s'", spec);
				return -1;
			}
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p) {
			say(err, errlen, "bad CPU list '%s': unexpected '%c'", spec, *p);
			return -1;
		}
		for (i = a; i <= b; i++) {
			if (i >= BENCH_MAX_CPUS || out->n == BENCH_MAX_CPUS) {
				say(err, errlen, "CPU %ld is beyond the %d this benchmark handles",
				    i, BENCH_MAX_CPUS);
				return -1;
			}
			out->cpu[out->n++] = (int)i;
		}
	}
	if (out->n == 0) {
		say(err, errlen, "empty CPU list");
		return -1;
	}
	return 0;
}

int bench_cpus_allowed(struct bench_cpus *out, char *err, size_t errlen)
{
	const char *env = getenv("SHMCOLL_CPUS");
	cpu_set_t set;
	int i;

	if (env && *env) {
		if (parse_list(env, out, err, errlen) < 0)
			return -1;
		return 0;
	}
	if (sched_getaffinity(0, sizeof(set), &set) < 0) {
		say(err, errlen, "sched_getaffinity: %s", strerror(errno));
		return -1;
	}
	out->n = 0;
	for (i = 0; i < CPU_SETSIZE && i < BENCH_MAX_CPUS; i++)
		if (CPU_ISSET(i, &set))
			out->cpu[out->n++] = i;
	return 0;
}

static int contains(const struct bench_cpus *c, int cpu)
{
	int i;

	for (i = 0; i < c->n; i++)
		if (c->cpu[i] == cpu)
			return 1;
	return 0;
}

char *bench_cpus_format(const struct bench_cpus *c, char *s, size_t len)
{
	size_t used = 0;
	int i = 0, j;

	if (len)
		s[0] = 0;
	while (i < c->n && used < len) {
		for (j = i; j + 1 < c->n && c->cpu[j + 1] == c->cpu[j] + 1; j++)
			;
		if (j > i)
			used += (size_t)snprintf(s + used, len - used, "%s%d-%d", i ? "," : "",
			                         c->cpu[i], c->cpu[j]);
		else
			used +=
			    (size_t)snprintf(s + used, len - used, "%s%d", i ? "," : "", c->cpu[i]);
		i = j + 1;
	}
	return s;
}

int bench_cpus_parse(const char *spec, const struct bench_cpus *allowed, struct bench_cpus *out,
                     char *err, size_t errlen)
{
	char set[256];
	int i, j, ncpus = cpus_configured();

	if (parse_list(spec, out, err, errlen) < 0)
		return -1;
	for (i = 0; i < out->n; i++) {
		if (out->cpu[i] >= ncpus) {
			say(err, errlen, "CPU %d does not exist: this machine has %d CPU%s (0-%d)",
			    out->cpu[i], ncpus, ncpus == 1 ? "" : "s", ncpus - 1);
			return -1;
		}
		if (!contains(allowed, out->cpu[i])) {
			say(err, errlen, "CPU %d is outside the CPUs this job may use (%s)",
			    out->cpu[i], bench_cpus_format(allowed, set, sizeof(set)));
			return -1;
		}
		for (j = 0; j < i; j++)
			if (out->cpu[j] == out->cpu[i]) {
				say(err, errlen, "CPU %d is listed twice in '%s'", out->cpu[i],
				    spec);
				return -1;
			}
	}
	return 0;
}

int bench_cpus_for(const char *mode, const char *spec, int need, const char *what,
                   struct bench_cpus *out)
{
	struct bench_cpus allowed;
	char err[512], set[256];

	if (bench_cpus_allowed(&allowed, err, sizeof(err)) < 0)
		return bench_usage_error("%s: %s", mode, err);
	if (spec) {
		if (bench_cpus_parse(spec, &allowed, out, err, sizeof(err)) < 0)
			return bench_usage_error("%s: --cpus: %s", mode, err);
		if (out->n < need)
			return bench_usage_error("%s: %s need %d CPUs, but --cpus %s names %d",
			                         mode, what, need, spec, out->n);
		return 0;
	}
	*out = allowed;
	if (out->n < need) {
		int ncpus = cpus_configured();

		if (need > ncpus)
			return bench_usage_error(
			    "%s: %s need %d CPUs, but this machine has only %d", mode, what, need,
			    ncpus);
		return bench_usage_error("%s: %s need %d CPUs, but this job may use only %d (%s)",
		                         mode, what, need, out->n,
		                         bench_cpus_format(&allowed, set, sizeof(set)));
	}
	return 0;
}

int bench_pin(int cpu, char *err, size_t errlen)
{
	cpu_set_t one;
	int rc;

	if (cpu < 0 || cpu >= CPU_SETSIZE) {
		say(err, errlen, "cannot pin to CPU %d", cpu);
		return -1;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	rc = sched_setaffinity(0, sizeof(one), &one);
	if (rc < 0) {
		say(err, errlen, "cannot pin to CPU %d: %s%s", cpu, strerror(errno),
		    errno == EINVAL ? " (outside this process's cpuset)" : "");
		return -1;
	}
	return 0;
}

/* A sysfs file of CPU 0's cache index i: its text, trimmed, or "" if missing. */
static void cache_attr(int i, const char *name, char *buf, size_t len)
{
	char path[128];
	FILE *f;
	size_t n;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, name);
	f = fopen(path, "r");
	if (!f)
		return;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
}

/* "0-1,4" -> 3 */
static int list_count(const char *s)
{
	struct bench_cpus c;
	char err[64];

	return parse_list(s, &c, err, sizeof(err)) < 0 ? 0 : c.n;
}

void bench_caches(struct bench_caches *c)
{
	char level[16], type[32], size[32], shared[256];
	char *end;
	int i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < 16; i++) {
		unsigned long long bytes;
		int lv;

		cache_attr(i, "level", level, sizeof(level));
		if (!level[0])
			break;
		cache_attr(i, "type", type, sizeof(type));
		cache_attr(i, "size", size, sizeof(size));
		cache_attr(i, "shared_cpu_list", shared, sizeof(shared));
		if (!strcmp(type, "Instruction"))
			continue;
		bytes = strtoull(size, &end, 10);
		if (*end == 'K')
			bytes <<= 10;
		else if (*end == 'M')
			bytes <<= 20;
		else if (*end == 'G')
			bytes <<= 30;
		lv = atoi(level);
		if (lv == 1)
			c->l1d = (size_t)bytes;
		else if (lv == 2)
			c->l2 = (size_t)bytes;
		else if (lv == 3) {
			c->l3 = (size_t)bytes;
			c->l3_shared = list_count(shared);
		}
	}
	if (!c->l1d) {
		long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);

		c->l1d = v > 0 ? (size_t)v : 0;
	}
	if (!c->l2) {
		long v = sysconf(_SC_LEVEL2_CACHE_SIZE);

		c->l2 = v > 0 ? (size_t)v : 0;
	}
}

size_t bench_llc(const struct bench_caches *c)
{
	if (c->l3)
		return c->l3;
	if (c->l2)
		return c->l2;
	if (c->l1d)
		return c->l1d;
	return (size_t)32 << 20;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_min(double *x, int n)
{
	double m = x[0];
	int i;

	for (i = 1; i < n; i++)
		if (x[i] < m)
			m = x[i];
	return m;
}

double bench_median(double *x, int n)
{
	qsort(x, (size_t)n, sizeof(*x), cmp_double);
	return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* The slow path of both waits: yield, and give up after BENCH_WAIT_S seconds. */
static int wait_slow(const _Atomic uint64_t *w, uint64_t want, int ge)
{
	double deadline = bench_now() + BENCH_WAIT_S;
	unsigned spins = 0;

	for (;;) {
		uint64_t v = atomic_load_explicit(w, memory_order_relaxed);

		if (ge ? v >= want : v == want)
			break;
		cpu_relax();
		if (++spins % SPINS_PER_YIELD == 0) {
			sched_yield();
			if (bench_now() > deadline)
				return -1;
		}
	}
	/* Pairs with the partner's release store of *w: an acquire load of the value seen (or
	 * a later one), rather than a fence, which ThreadSanitizer cannot follow. */
	(void)atomic_load_explicit(w, memory_order_acquire);
	return 0;
}

int bench_wait_eq(const _Atomic uint64_t *w, uint64_t want)
{
	unsigned spins;

	/* The fast path: a relaxed spin, ordered once below. */
	for (spins = 0; spins < SPINS_PER_YIELD; spins++) {
		if (atomic_load_explicit(w, memory_order_relaxed) == want) {
			/* Pairs with the partner's release store of *w (as in wait_slow). */
			(void)atomic_load_explicit(w, memory_order_acquire);
			return 0;
		}
		cpu_relax();
	}
	return wait_slow(w, want, 0);
}

int bench_wait_ge(const _Atomic uint64_t *w, uint64_t want)
{
	unsigned spins;

	for (spins = 0; spins < SPINS_PER_YIELD; spins++) {
		if (atomic_load_explicit(w, memory_order_relaxed) >= want) {
			/* Pairs with the partner's release store of *w (as in wait_slow). */
			(void)atomic_load_explicit(w, memory_order_acquire);
			return 0;
		}
		cpu_relax();
	}
	return wait_slow(w, want, 1);
}

void *bench_shared_alloc(shmcoll_comm *comm, size_t bytes)
{
	void *p = shmcoll_malloc(comm, bytes ? bytes : 1);

	if (p)
		memset(p, 0, bytes);
	return p;
}

void *bench_shared_peer(shmcoll_comm *comm, void *mine, int p)
{
	return shmcoll__probe_peer(comm, mine, p);
}

int bench_stop_together(shmcoll_comm *comm, int rc)
{
	shmcoll_barrier(comm);
	return rc;
}

int bench_fault(const char *mode)
{
	const char *f = getenv("SHMCOLL_BENCH_FAULT");

	return f && !strcmp(f, mode);
}

char *bench_bytes_str(size_t bytes, char *s, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (v == (double)(long long)v)
		snprintf(s, len, "%lld %s", (long long)v, unit[u]);
	else
		snprintf(s, len, "%.1f %s", v, unit[u]);
	return s;
}

void bench_cpu_model(char *s, size_t len)
{
	char buf[512], *p;
	size_t n;
	FILE *f = fopen("/proc/cpuinfo", "r");

	s[0] = 0;
	if (!f)
		return;
	while (fgets(buf, sizeof(buf), f)) {
		if (strncmp(buf, "model name", 10))
			continue;
		p = strchr(buf, ':');
		if (!p)
			break;
		for (p++; *p == ' ' || *p == '\t'; p++)
			;
		n = strcspn(p, "\n");
		while (n && p[n - 1] == ' ')
			n--;
		snprintf(s, len, "%.*s", (int)n, p);
		break;
	}
	fclose(f);
}

void bench_plot_cache_marks(FILE *script, const struct bench_caches *c)
{
	const struct {
		const char *name;
		size_t bytes;
	} lv[] = {{"L1d", c->l1d}, {"L2", c->l2}, {"L3", c->l3}};
	char b[32];
	size_t i;

	for (i = 0; i < sizeof(lv) / sizeof(lv[0]); i++) {
		if (!lv[i].bytes)
			continue;
		fprintf(script,
		        "set arrow from %zu, graph 0 to %zu, graph 1 nohead dt 2 lc rgb '#888888'\n"
		        "set label '%s %s' at %zu, graph 0.97 rotate by 90 right offset -0.8,0 "
		        "tc rgb '#555555' font ',9'\n",
		        lv[i].bytes, lv[i].bytes, lv[i].name,
		        bench_bytes_str(lv[i].bytes, b, sizeof(b)), lv[i].bytes);
	}
}

int bench_mem_init(const char *mode, shmcoll_comm **comm)
{
	const char *nn = getenv("SHMCOLL_NNODES");
	int rc;

	if (nn && atoi(nn) > 1)
		return bench_usage_error("%s: the memory-system modes measure one node; run them "
		                         "without --nnodes",
		                         mode);
	rc = shmcoll_init(comm);
	if (rc < 0) {
		fprintf(stderr, PROG ": shmcoll_init failed: %d (%s): %s\n", rc,
		        shmcoll_strerror(rc), shmcoll_last_error(NULL));
		return EXIT_FAIL;
	}
	return 0;
}
