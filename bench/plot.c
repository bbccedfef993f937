/* plot.c - gnuplot for every harness (plot.h). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "bench/bench.h"
#include "bench/plot.h"

int bench_gnuplot(const char *script)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	FILE *g;
	int st;

	fflush(NULL);
	/* Where gnuplot is missing, the shell behind popen() exits before reading the script,
	 * and writing it would kill this process with SIGPIPE before it could say why. gnuplot's
	 * own output goes to stderr: stdout is the table. */
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old);
	g = popen("gnuplot 1>&2", "w");
	if (!g) {
		fprintf(stderr, "%s: --plot: cannot start gnuplot: %s\n", bench_prog,
		        strerror(errno));
		sigaction(SIGPIPE, &old, NULL);
		return -1;
	}
	fputs(script, g);
	st = pclose(g);
	sigaction(SIGPIPE, &old, NULL);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
			fprintf(stderr,
			        "%s: --plot needs gnuplot, which is not installed (apt-get install "
			        "gnuplot-nox)\n",
			        bench_prog);
		else
			fprintf(stderr, "%s: --plot: gnuplot failed (status %d)\n", bench_prog, st);
		return -1;
	}
	return 0;
}

void bench_gp_quote(FILE *script, const char *s)
{
	fputc('\'', script);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', script);
		fputc(*s, script);
	}
	fputc('\'', script);
}
