/* criterion.h - the part of Criterion's API the suites use, for builds that
 * Criterion cannot run in: under ThreadSanitizer its sandbox cannot map its
 * arena beside TSan's shadow memory, and it crashes when it does (upstream
 * Snaipe/Criterion#274). tests/tsan/runner.c runs the tests, each in its own
 * process with its timeout, and prints TAP as `-Otap:-` does. Only a
 * -Db_sanitize=thread build puts this directory before the real header. */
#ifndef SHMCOLL_TESTS_TSAN_CRITERION_H
#define SHMCOLL_TESTS_TSAN_CRITERION_H

/* As the real header, which sits in a system directory: Test(suite, name)
 * with no options is how the API is meant to be used. */
#pragma GCC system_header

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tr_opts {
	int unused_;    /* lets Test(suite, name) expand to { 0, } */
	double timeout; /* seconds; 0: the suite's, or none */
	int disabled;
	int exit_code; /* the test passes iff it exits with this code */
	int signal;    /* the test passes iff this signal kills it */
	const char *description;
	void (*init)(void);
	void (*fini)(void);
};

struct tr_test {
	const char *suite, *name;
	void (*fn)(void);
	struct tr_opts opts;
	struct tr_test *next;
};

struct tr_suite {
	const char *name;
	struct tr_opts opts;
	struct tr_suite *next;
};

void tr_register(struct tr_test *t);
void tr_register_suite(struct tr_suite *s);
void tr_fail(int fatal, const char *file, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
_Noreturn void tr_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tr_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define Test(suite, name, ...)                                                                     \
	static void tr_fn_##suite##_##name(void);                                                  \
	static struct tr_test tr_test_##suite##_##name = {                                         \
	    #suite, #name, tr_fn_##suite##_##name, {0, __VA_ARGS__}, NULL};                        \
	__attribute__((constructor)) static void tr_reg_##suite##_##name(void)                     \
	{                                                                                          \
		tr_register(&tr_test_##suite##_##name);                                            \
	}                                                                                          \
	static void tr_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                      \
	static struct tr_suite tr_suite_##suite;                                                   \
	__attribute__((constructor)) static void tr_sreg_##suite(void)                             \
	{                                                                                          \
		tr_register_suite(&tr_suite_##suite);                                              \
	}                                                                                          \
	static struct tr_suite tr_suite_##suite = {#suite, {0, __VA_ARGS__}, NULL}

/* The message, if any, is a format and its arguments; " " makes an absent
 * one an empty (but non-zero-length) format. */
#define cr_assert(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			tr_fail(1, __FILE__, __LINE__, #cond, " " __VA_ARGS__);                    \
	} while (0)
#define cr_expect(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			tr_fail(0, __FILE__, __LINE__, #cond, " " __VA_ARGS__);                    \
	} while (0)
#define cr_assert_fail(...) tr_fail(1, __FILE__, __LINE__, "cr_assert_fail", " " __VA_ARGS__)
#define cr_skip_test(...)   tr_skip(" " __VA_ARGS__)
#define cr_log_info(...)    tr_log("info", __VA_ARGS__)
#define cr_log_warn(...)    tr_log("warn", __VA_ARGS__)
#define cr_log_error(...)   tr_log("error", __VA_ARGS__)

#define cr_assert_not(cond, ...)        cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...)         cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...)        cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...)         cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...)        cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...)         cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...)        cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...)          cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...)      cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)     cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)    cr_assert(strcmp((a), (b)) != 0, __VA_ARGS__)
#define cr_assert_str_empty(s, ...)     cr_assert((s)[0] == '\0', __VA_ARGS__)
#define cr_assert_str_not_empty(s, ...) cr_assert((s)[0] != '\0', __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...)  cr_assert(memcmp((a), (b), (n)) == 0, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                                         \
	cr_assert((double)(a) - (double)(b) <= (eps) && (double)(b) - (double)(a) <= (eps),        \
	          __VA_ARGS__)
#define cr_expect_eq(a, b, ...)     cr_expect((a) == (b), __VA_ARGS__)
#define cr_expect_neq(a, b, ...)    cr_expect((a) != (b), __VA_ARGS__)
#define cr_expect_null(p, ...)      cr_expect((p) == NULL, __VA_ARGS__)
#define cr_expect_not_null(p, ...)  cr_expect((p) != NULL, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)     cr_expect((a) < (b), __VA_ARGS__)
#define cr_expect_leq(a, b, ...)    cr_expect((a) <= (b), __VA_ARGS__)
#define cr_expect_gt(a, b, ...)     cr_expect((a) > (b), __VA_ARGS__)
#define cr_expect_geq(a, b, ...)    cr_expect((a) >= (b), __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) cr_expect(strcmp((a), (b)) == 0, __VA_ARGS__)

#endif
