/* tunefile.c - the tuning file shmcoll-tune writes: this machine's protocol crossovers, read
 * by rank 0 of a node communicator at create (tuning.h). Strict: a file with anything this
 * parser does not understand is rejected whole, with the line and the reason, and the
 * built-in thresholds stay. */
#include "lib/core/tuning.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Larger is not a tuning file: a wrong path (a log, a core file) is refused unread. */
#define TUNEFILE_MAX_BYTES 65536

enum key_kind { KEY_BYTES, KEY_RANKS, KEY_NS, KEY_VERSION };

struct key {
	const char *name;
	enum key_kind kind;
	int kind_id; /* enum shmcoll_kind for the per-collective keys; 0 otherwise */
	int over;    /* the threshold for ranks that outnumber the CPUs */
};

static const struct key keys[] = {
    {"version", KEY_VERSION, 0, 0},
    {"allreduce.direct_min_bytes", KEY_BYTES, KIND_ALLREDUCE, 0},
    {"allreduce.direct_min_bytes.oversubscribed", KEY_BYTES, KIND_ALLREDUCE, 1},
    {"reduce.direct_min_bytes", KEY_BYTES, KIND_REDUCE, 0},
    {"barrier.tree_min_ranks", KEY_RANKS, KIND_BARRIER, 0},
    {"bcast.tree_min_ranks", KEY_RANKS, KIND_BCAST, 0},
    {"chunk_bytes", KEY_BYTES, 0, 0},
    {"cma_min_bytes", KEY_BYTES, 0, 0},
    {"hop_ns", KEY_NS, 0, 0},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* A byte count: decimal, optionally followed by K, M or G (binary multiples). */
static int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end == 'K' || *end == 'M' || *end == 'G') {
		shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
		end++;
	}
	if (*end || v > UINT64_MAX >> shift)
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int set_value(struct shmcoll_tunefile *f, const struct key *k, const char *v, char *why,
                     size_t whylen)
{
	uint64_t n;
	double d;
	char *end;

	if (k->kind == KEY_NS) {
		errno = 0;
		d = strtod(v, &end);
		if (errno || *end || end == v || !isfinite(d) || d <= 0 || d > 1e9) {
			snprintf(why, whylen, "%s wants nanoseconds > 0, not '%s'", k->name, v);
			return -1;
		}
		f->hop_ns = d;
		return 0;
	}
	if (parse_bytes(v, &n) < 0) {
		snprintf(why, whylen, "%s wants a whole number (K, M, G allowed), not '%s'",
		         k->name, v);
		return -1;
	}
	switch (k->kind) {
	case KEY_VERSION:
		if (n != SHMCOLL_TUNEFILE_VERSION) {
			snprintf(why, whylen, "version %s: this library reads version %d", v,
			         SHMCOLL_TUNEFILE_VERSION);
			return -1;
		}
		break;
	case KEY_RANKS:
		if (n < 2 || n > SHMCOLL_TUNE_MAX_RANKS) {
			snprintf(why, whylen, "%s wants a rank count in [2, %d], not '%s'", k->name,
			         SHMCOLL_TUNE_MAX_RANKS, v);
			return -1;
		}
		f->tree_min[k->kind_id] = (uint32_t)n;
		break;
	case KEY_BYTES:
		if (k->kind_id) {
			if (n == 0) {
				snprintf(why, whylen, "%s wants at least 1 byte", k->name);
				return -1;
			}
			if (k->over)
				f->direct_min_over[k->kind_id] = n;
			else
				f->direct_min[k->kind_id] = n;
		} else if (!strcmp(k->name, "chunk_bytes")) {
			if (n < 64) {
				snprintf(why, whylen, "chunk_bytes wants at least 64, not '%s'", v);
				return -1;
			}
			f->chunk_bytes = n;
		} else {
			f->cma_min = n ? n : 1; /* as SHMCOLL_CMA_MIN: 0 asks for every size */
		}
		break;
	case KEY_NS:
		break;
	}
	return 0;
}

int shmcoll__tunefile_parse(const char *text, struct shmcoll_tunefile *f, char *why, size_t whylen)
{
	char line[256];
	const char *p = text, *nl;
	unsigned seen = 0;
	int lineno = 0;

	memset(f, 0, sizeof(*f));
	while (*p) {
		char *s, *e, *eq, *val;
		size_t len, i;

		nl = strchr(p, '\n');
		len = nl ? (size_t)(nl - p) : strlen(p);
		lineno++;
		if (len >= sizeof(line)) {
			snprintf(why, whylen, "line %d: longer than %zu characters", lineno,
			         sizeof(line) - 1);
			return -EINVAL;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl ? nl + 1 : p + len;
		if ((s = strchr(line, '#')))
			*s = '\0';
		for (s = line; *s == ' ' || *s == '\t' || *s == '\r'; s++)
			;
		for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r');)
			*--e = '\0';
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(why, whylen, "line %d: '%s' is not 'key = value'", lineno, s);
			return -EINVAL;
		}
		for (val = eq + 1; *val == ' ' || *val == '\t'; val++)
			;
		for (e = eq; e > s && (e[-1] == ' ' || e[-1] == '\t');)
			e--;
		*e = '\0';
		for (i = 0; i < NKEYS; i++)
			if (!strcmp(s, keys[i].name))
				break;
		if (i == NKEYS) {
			snprintf(
			    why, whylen,
			    "line %d: unknown key '%s' (known: version, "
			    "allreduce.direct_min_bytes, "
			    "allreduce.direct_min_bytes.oversubscribed, reduce.direct_min_bytes, "
			    "barrier.tree_min_ranks, bcast.tree_min_ranks, chunk_bytes, "
			    "cma_min_bytes, hop_ns)",
			    lineno, s);
			return -EINVAL;
		}
		if (seen & 1u << i) {
			snprintf(why, whylen, "line %d: %s is set twice", lineno, s);
			return -EINVAL;
		}
		seen |= 1u << i;
		if (set_value(f, &keys[i], val, line, sizeof(line)) < 0) {
			snprintf(why, whylen, "line %d: %s", lineno, line);
			return -EINVAL;
		}
	}
	return 0;
}

int shmcoll__tunefile_load(const char *path, struct shmcoll_tunefile *f, char *why, size_t whylen)
{
	char *text;
	ssize_t got;
	size_t len = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open it: %s", strerror(errno));
		return rc;
	}
	text = malloc(TUNEFILE_MAX_BYTES + 1);
	if (!text) {
		close(fd);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	while ((got = read(fd, text + len, TUNEFILE_MAX_BYTES + 1 - len)) > 0 &&
	       len + (size_t)got <= TUNEFILE_MAX_BYTES)
		len += (size_t)got;
	close(fd);
	if (got < 0) {
		snprintf(why, whylen, "cannot read it: %s", strerror(errno));
		free(text);
		return -EIO;
	}
	if (got > 0) {
		snprintf(why, whylen, "larger than %d bytes: not a tuning file",
		         TUNEFILE_MAX_BYTES);
		free(text);
		return -EINVAL;
	}
	text[len] = '\0';
	if (memchr(text, '\0', len)) {
		snprintf(why, whylen, "has a NUL byte: not a tuning file");
		free(text);
		return -EINVAL;
	}
	rc = shmcoll__tunefile_parse(text, f, why, whylen);
	free(text);
	return rc;
}

const char *shmcoll__tunefile_path(void)
{
	const char *env = getenv("SHMCOLL_TUNE");

	if (env)
		return *env && strcmp(env, "none") ? env : NULL;
	return SHMCOLL_TUNE_DEFAULT_PATH;
}
