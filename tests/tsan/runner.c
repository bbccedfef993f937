/* runner.c - runs the tests that criterion/criterion.h (this directory's)
 * registered, the way Criterion does for meson: each test in a process of
 * its own, killed with its process group at its timeout, the results as TAP
 * on stdout. Arguments (-Otap:-, --jobs 1) are accepted and ignored. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG_BYTES 4096
#define EXIT_SKIP 77

static struct tr_test *tests;
static struct tr_suite *suites;
static size_t ntests;

/* Shared with the test's process: why it failed or skipped. */
static char *msg;
static int expect_failed;

void tr_register(struct tr_test *t)
{
	t->next = tests;
	tests = t;
	ntests++;
}

void tr_register_suite(struct tr_suite *s)
{
	s->next = suites;
	suites = s;
}

static void note(const char *fmt, va_list ap)
{
	size_t used = strlen(msg);

	if (used < MSG_BYTES - 1)
		vsnprintf(msg + used, MSG_BYTES - used, fmt, ap);
}

static void notef(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note(fmt, ap);
	va_end(ap);
}

void tr_fail(int fatal, const char *file, int line, const char *what, const char *fmt, ...)
{
	size_t from = strlen(msg);
	va_list ap;

	notef("%s:%d: %s failed: %s", file, line, fatal ? "assertion" : "expectation", what);
	if (fmt[1]) {
		notef(":");
		va_start(ap, fmt);
		note(fmt, ap);
		va_end(ap);
	}
	notef("\n");
	fprintf(stderr, "%s", msg + from);
	if (fatal)
		exit(1);
	expect_failed = 1;
}

void tr_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	note(fmt + 1, ap);
	va_end(ap);
	exit(EXIT_SKIP);
}

void tr_log(const char *level, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s] ", level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int by_name(const void *a, const void *b)
{
	const struct tr_test *x = *(const struct tr_test *const *)a;
	const struct tr_test *y = *(const struct tr_test *const *)b;
	int c = strcmp(x->suite, y->suite);

	return c ? c : strcmp(x->name, y->name);
}

static double timeout_of(const struct tr_test *t)
{
	const struct tr_suite *s;

	if (t->opts.timeout > 0)
		return t->opts.timeout;
	for (s = suites; s; s = s->next)
		if (!strcmp(s->name, t->suite))
			return s->opts.timeout;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints the lines of msg as the YAML block under a "not ok" line. */
static void print_msg(void)
{
	char *line = msg, *end;

	if (!*msg)
		return;
	printf("  ---\n");
	while (*line) {
		end = strchr(line, '\n');
		printf("  # %.*s\n", end ? (int)(end - line) : (int)strlen(line), line);
		if (!end)
			break;
		line = end + 1;
	}
	printf("  ...\n");
}

/* Runs one test in a child and prints its TAP line. Returns 1 if it failed. */
static int run_one(size_t i, const struct tr_test *t)
{
	double limit = timeout_of(t), start = now_s(), took;
	struct timespec nap = {0, 1000000};
	int status = 0, timed_out = 0, ok;
	pid_t pid, w;

	if (t->opts.disabled) {
		printf("ok %zu - %s::%s # SKIP disabled\n", i, t->suite, t->name);
		return 0;
	}
	msg[0] = '\0';
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		printf("not ok %zu - %s::%s\n  # fork: %s\n", i, t->suite, t->name,
		       strerror(errno));
		return 1;
	}
	if (pid == 0) {
		/* A group of its own, so a timeout takes its processes too;
		 * its stdout goes to stderr, so only this runner writes TAP. */
		setpgid(0, 0);
		dup2(2, 1);
		if (t->opts.init)
			t->opts.init();
		t->fn();
		if (t->opts.fini)
			t->opts.fini();
		exit(expect_failed ? 1 : 0);
	}
	setpgid(pid, pid);
	for (;;) {
		w = waitpid(pid, &status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if (limit > 0 && now_s() - start > limit) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			timed_out = 1;
			break;
		}
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 50000000)
			nap.tv_nsec *= 2;
	}
	/* Whatever the test left running in its group goes with it. */
	kill(-pid, SIGKILL);
	took = now_s() - start;

	if (timed_out) {
		printf("not ok %zu - %s::%s %.2fs\n  # timed out after %.0f s\n", i, t->suite,
		       t->name, took, limit);
		print_msg();
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP && !t->opts.exit_code) {
		printf("ok %zu - %s::%s # SKIP %s\n", i, t->suite, t->name,
		       strtok(msg, "\n") ? msg : "skipped");
		return 0;
	}
	if (t->opts.signal)
		ok = WIFSIGNALED(status) && WTERMSIG(status) == t->opts.signal;
	else
		ok = WIFEXITED(status) && WEXITSTATUS(status) == t->opts.exit_code;
	printf("%s %zu - %s::%s %.2fs\n", ok ? "ok" : "not ok", i, t->suite, t->name, took);
	if (!ok) {
		if (WIFSIGNALED(status))
			notef("killed by signal %d (%s)\n", WTERMSIG(status),
			      strsignal(WTERMSIG(status)));
		else if (WIFEXITED(status) && WEXITSTATUS(status) != 1)
			notef("exited with status %d\n", WEXITSTATUS(status));
		print_msg();
	}
	return !ok;
}

int main(int argc, char **argv)
{
	struct tr_test **order, *t;
	size_t i = 0;
	int failed = 0;

	msg = mmap(NULL, MSG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	order = calloc(ntests ? ntests : 1, sizeof(*order));
	if (msg == MAP_FAILED || !order) {
		printf("Bail out! out of memory\n");
		return 1;
	}
	for (t = tests; t; t = t->next)
		order[i++] = t;
	qsort(order, ntests, sizeof(*order), by_name);
	printf("TAP version 13\n1..%zu\n# %s: %zu tests, each in its own process\n", ntests,
	       argc > 0 ? argv[0] : "runner", ntests);
	for (i = 0; i < ntests; i++)
		failed += run_one(i + 1, order[i]);
	free(order);
	return failed ? 1 : 0;
}
