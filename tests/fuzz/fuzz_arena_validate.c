/* fuzz_arena_validate.c - libFuzzer target for shmcoll__arena_validate(), the
 * check an attaching rank runs on a header it did not write. Whatever it
 * accepts must describe parts that lie inside the segment, in order, without
 * overflow: the attach path maps and indexes the segment by those numbers.
 *
 * Input (host byte order; missing bytes read as zero): the segment's size (8
 * bytes), the caller's rank count (4), the error buffer's length - 1 (1),
 * then the header as it sits in the segment (cut or zero-padded to its size).
 * seeds.c writes inputs in this form. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "shm/arena.h"
#include "tests/fuzz/fuzz.h"

/* a + b * c, or 0 with *ok cleared when it does not fit 64 bits. */
static uint64_t add_mul(uint64_t a, uint64_t b, uint64_t c, int *ok)
{
	uint64_t m, r;

	if (__builtin_mul_overflow(b, c, &m) || __builtin_add_overflow(a, m, &r)) {
		*ok = 0;
		return 0;
	}
	return r;
}

static void check_accepted(const struct shmcoll_arena_hdr *h, uint64_t file_bytes, uint32_t nranks)
{
	uint64_t ctrl_end, slot_end, p2p_end, ring_end, heap_end;
	int ok = 1;

	FUZZ_CHECK(nranks >= 1 && nranks <= SHMCOLL_MAX_RANKS, "nranks %u", nranks);
	FUZZ_CHECK(h->nranks == nranks, "header %u ranks, caller %u", h->nranks, nranks);
	FUZZ_CHECK(h->total_bytes == file_bytes, "total %llu, file %llu",
	           (unsigned long long)h->total_bytes, (unsigned long long)file_bytes);
	FUZZ_CHECK(file_bytes <= SIZE_MAX, "file %llu", (unsigned long long)file_bytes);
	FUZZ_CHECK(h->ctrl_off >= sizeof(*h) && h->ctrl_off % SHMCOLL_LINE == 0 &&
	               h->slot_off % SHMCOLL_LINE == 0 && h->heap_off % SHMCOLL_LINE == 0,
	           "offsets ctrl %llu slot %llu heap %llu", (unsigned long long)h->ctrl_off,
	           (unsigned long long)h->slot_off, (unsigned long long)h->heap_off);
	/* Every peer indexes nranks control blocks, and a chunk split per peer
	 * needs 8 bytes per rank in a staging half. */
	FUZZ_CHECK(h->slot_half >= (uint64_t)nranks * 8 && h->slot_half % SHMCOLL_LINE == 0 &&
	               h->slot_stride == 2 * h->slot_half,
	           "slot half %llu stride %llu", (unsigned long long)h->slot_half,
	           (unsigned long long)h->slot_stride);
	FUZZ_CHECK(h->heap_stride % SHMCOLL_LINE == 0, "heap stride %llu",
	           (unsigned long long)h->heap_stride);
	/* Rings: a power of two, every control word inside its block, every ring inside the
	 * rings' part, which ends where the heaps begin. */
	FUZZ_CHECK(h->ring_bytes >= 256 && !(h->ring_bytes & (h->ring_bytes - 1)) &&
	               h->ring_off % SHMCOLL_LINE == 0 &&
	               h->p2p_stride >= 2 * (uint64_t)nranks * 4 + 2 * SHMCOLL_LINE,
	           "ring %llu at %llu, control stride %llu", (unsigned long long)h->ring_bytes,
	           (unsigned long long)h->ring_off, (unsigned long long)h->p2p_stride);
	ctrl_end = add_mul(h->ctrl_off, nranks, sizeof(struct shmcoll_ctrl), &ok);
	slot_end = add_mul(h->slot_off, nranks, h->slot_stride, &ok);
	p2p_end = add_mul(h->p2p_off, nranks, h->p2p_stride, &ok);
	ring_end = add_mul(h->ring_off, (uint64_t)nranks * nranks, h->ring_bytes, &ok);
	heap_end = add_mul(h->heap_off, nranks, h->heap_stride, &ok);
	FUZZ_CHECK(ok, "a part's end overflows 64 bits (slot stride %llu, heap stride %llu)",
	           (unsigned long long)h->slot_stride, (unsigned long long)h->heap_stride);
	FUZZ_CHECK(slot_end <= h->p2p_off && p2p_end <= h->ring_off && ring_end <= h->heap_off,
	           "point-to-point parts out of order: slots end %llu, control %llu..%llu, rings "
	           "%llu..%llu, heap %llu",
	           (unsigned long long)slot_end, (unsigned long long)h->p2p_off,
	           (unsigned long long)p2p_end, (unsigned long long)h->ring_off,
	           (unsigned long long)ring_end, (unsigned long long)h->heap_off);
	FUZZ_CHECK(ctrl_end <= h->slot_off && slot_end <= h->heap_off && heap_end <= file_bytes,
	           "parts out of order or past the segment: ctrl end %llu, slot %llu..%llu, "
	           "heap %llu..%llu, file %llu",
	           (unsigned long long)ctrl_end, (unsigned long long)h->slot_off,
	           (unsigned long long)slot_end, (unsigned long long)h->heap_off,
	           (unsigned long long)heap_end, (unsigned long long)file_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	struct shmcoll_arena_hdr h, before;
	uint64_t file_bytes;
	uint32_t nranks;
	uint8_t errlen1;
	size_t errlen;
	char *err;
	int rc;

	fuzz_take(&in, &file_bytes, sizeof(file_bytes));
	fuzz_take(&in, &nranks, sizeof(nranks));
	fuzz_take(&in, &errlen1, sizeof(errlen1));
	fuzz_take(&in, &h, sizeof(h));
	errlen = (size_t)errlen1 + 1;
	err = fuzz_errbuf(errlen);
	memcpy(&before, &h, sizeof(h));

	rc = shmcoll__arena_validate(&h, file_bytes, nranks, err, errlen);

	FUZZ_CHECK(rc == 0 || rc == -EPROTO, "returned %d", rc);
	FUZZ_CHECK(!memcmp(&before, &h, sizeof(h)), "the header copy was written");
	if (rc == 0)
		check_accepted(&h, file_bytes, nranks);
	else
		FUZZ_CHECK(fuzz_terminated(err, errlen), "message not terminated in %zu bytes",
		           errlen);
	free(err);
	return 0;
}
