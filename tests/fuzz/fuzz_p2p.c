/* fuzz_p2p.c - libFuzzer target for the point-to-point ring parser (lib/core/p2p.c): what
 * a receiving rank reads from a ring a peer wrote - its tail word, frame stamps and headers,
 * payload lengths, message ids - is never trusted. Whatever the bytes, the receiver must not
 * read or write outside the ring and its own buffers (AddressSanitizer), and either takes
 * the frames or breaks the communicator with -EPROTO; never anything else.
 *
 * Input: lib/api/probe.h's shmcoll__probe_p2p_fuzz form (flags, head, tail, ring bytes);
 * fuzz_seeds writes frames the real sender produced in that form. */
#include <errno.h>

#include "lib/api/probe.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t ring = 0;
	int rc = shmcoll__probe_p2p_fuzz(data, size, &ring);

	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM, "progress returned %d", rc);
	FUZZ_CHECK(ring >= 256, "ring of %zu bytes", ring);
	return 0;
}
