/* seeds_p2p.c - writes the seed inputs of fuzz_p2p: rings as the real sender fills them
 * (lib/api/probe.h's shmcoll__probe_p2p_seed), so the fuzzer starts from frames that parse.
 * Made at run time, so the seeds follow the frame format as it changes.
 *
 * usage: fuzz_seeds_p2p DIR */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/api/probe.h"

int main(int argc, char **argv)
{
	static uint8_t buf[1 << 20];
	char path[4096];
	size_t len;
	FILE *f;
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds_p2p DIR\n");
		return 2;
	}
	for (i = 0; (len = shmcoll__probe_p2p_seed(i, buf, sizeof(buf))) > 0; i++) {
		snprintf(path, sizeof(path), "%s/ring-%d", argv[1], i);
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
			fprintf(stderr, "fuzz_seeds_p2p: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	printf("fuzz_seeds_p2p: %d rings in %s\n", i, argv[1]);
	return i > 0 ? 0 : 1;
}
