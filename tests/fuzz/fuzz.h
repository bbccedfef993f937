/* fuzz.h - what the libFuzzer targets share: the entry point's prototype, a
 * reader over the input bytes, and the check that turns a broken invariant
 * into a crash libFuzzer records. */
#ifndef SHMCOLL_TESTS_FUZZ_H
#define SHMCOLL_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a finding: say which, then abort so libFuzzer saves
 * the input. */
#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz: %s:%d: invariant broken: %s: ", __FILE__, __LINE__, \
			        #cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

/* Copies the next n bytes into dst; past the end of the input, zeros. */
static inline void fuzz_take(struct fuzz_in *in, void *dst, size_t n)
{
	size_t k = n < in->left ? n : in->left;

	memcpy(dst, in->p, k);
	memset((uint8_t *)dst + k, 0, n - k);
	in->p += k;
	in->left -= k;
}

/* The rest of the input as a NUL-terminated string in a buffer of exactly
 * that size, so AddressSanitizer sees any read past the terminator. Bytes
 * after an embedded NUL are simply not part of the string. */
static inline char *fuzz_string(struct fuzz_in *in)
{
	char *s = malloc(in->left + 1);

	if (!s)
		abort();
	memcpy(s, in->p, in->left);
	s[in->left] = '\0';
	in->p += in->left;
	in->left = 0;
	return s;
}

/* An error buffer of exactly len bytes (len >= 1), filled with a byte no
 * message contains, so an unterminated or overlong message shows. */
static inline char *fuzz_errbuf(size_t len)
{
	char *e = malloc(len);

	if (!e)
		abort();
	memset(e, 0x7f, len);
	return e;
}

static inline int fuzz_terminated(const char *buf, size_t len)
{
	return memchr(buf, '\0', len) != NULL;
}

#endif
