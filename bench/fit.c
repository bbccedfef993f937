/* fit.c - the alpha-beta fit of a sweep (fit.h).
 *
 * Why relative error: a sweep's latencies span four orders of magnitude (under a microsecond at
 * 4 bytes, milliseconds at 64 MiB). Plain least squares minimises absolute errors, so the few
 * largest sizes decide the line alone: a 1% wobble at 64 MiB is worth more than every small
 * size together, and alpha comes out as that wobble (tens of microseconds, often negative). We
 * minimise sum(((t_i - alpha - beta*n_i) / t_i)^2) instead, so that a 10% miss costs the same at
 * 8 bytes as at 64 MiB: weighted least squares with weights 1/t_i^2, the usual choice when the
 * noise of a measurement grows with its value, as timing noise does. It is solved in closed
 * form about the weighted means, which keeps the sums of n^2 (up to 2^52) from cancelling
 * against the small terms. */
#include "bench/fit.h"

#include <math.h>

const char bench_fit_header[] = "# fit,impl,op,ranks,alpha_us,beta_ns_per_KiB,asymptotic_GBps,r2,"
                                "max_rel_err,min_bytes,max_bytes,sizes\n";

void bench_fit_add(struct bench_fit_pts *p, size_t bytes, double lat_us)
{
	if (p->n >= BENCH_FIT_MAX)
		return;
	p->bytes[p->n] = (double)bytes;
	p->lat_us[p->n] = lat_us;
	p->n++;
}

int bench_fit_line(const double *bytes, const double *lat_us, int k, struct bench_fit *f)
{
	double w, sw = 0, swn = 0, swt = 0, nbar, tbar, sxx = 0, sxy = 0, ssres = 0, sstot = 0;
	double lo, hi, r, a, b;
	int i;

	if (k < 2)
		return -1;
	lo = hi = bytes[0];
	for (i = 0; i < k; i++) {
		/* A zero or negative latency has no relative error, and NaN poisons every sum. */
		if (!isfinite(lat_us[i]) || lat_us[i] <= 0 || !isfinite(bytes[i]) || bytes[i] < 0)
			return -1;
		lo = bytes[i] < lo ? bytes[i] : lo;
		hi = bytes[i] > hi ? bytes[i] : hi;
	}
	if (lo == hi) /* one size: any slope fits it */
		return -1;
	for (i = 0; i < k; i++) {
		w = 1.0 / (lat_us[i] * lat_us[i]);
		sw += w;
		swn += w * bytes[i];
		swt += w * lat_us[i];
	}
	nbar = swn / sw;
	tbar = swt / sw;
	for (i = 0; i < k; i++) {
		w = 1.0 / (lat_us[i] * lat_us[i]);
		sxx += w * (bytes[i] - nbar) * (bytes[i] - nbar);
		sxy += w * (bytes[i] - nbar) * (lat_us[i] - tbar);
	}
	b = sxy / sxx;
	a = tbar - b * nbar;
	f->alpha_us = a;
	f->beta_us_per_byte = b;
	f->max_rel_err = 0;
	for (i = 0; i < k; i++) {
		r = (lat_us[i] - a - b * bytes[i]) / lat_us[i];
		ssres += r * r;
		/* The best constant on this scale is the weighted mean tbar: R^2 is the share of
		 * the relative variation that the size explains. */
		r = (lat_us[i] - tbar) / lat_us[i];
		sstot += r * r;
		r = fabs((lat_us[i] - a - b * bytes[i]) / lat_us[i]);
		f->max_rel_err = r > f->max_rel_err ? r : f->max_rel_err;
	}
	/* The constant (beta = 0) is one of the lines fitted, so ssres <= sstot but for rounding;
	 * every latency the same leaves nothing to explain, and the line is then exact. */
	f->r2 = sstot > 0 ? 1.0 - ssres / sstot : 1.0;
	f->r2 = f->r2 < 0 ? 0 : f->r2 > 1 ? 1 : f->r2;
	f->min_bytes = lo;
	f->max_bytes = hi;
	f->sizes = k;
	return 0;
}

int bench_fit_sizes(size_t minb, size_t maxb)
{
	size_t b;
	int k = 0;

	if (minb == 0)
		return 0;
	for (b = minb; b <= maxb; b *= 2) {
		k++;
		if (b > maxb / 2) /* the next size is past maxb, or would overflow */
			break;
	}
	return k;
}

int bench_fit_row(char *buf, size_t len, const char *impl, const char *op, int ranks,
                  const struct bench_fit *f)
{
	char asym[32];

	/* 1 byte/us is 1e-3 GB/s. A slope of zero or less is no bandwidth: the model does not
	 * describe that sweep, and the row says so rather than print an infinity. */
	if (f->beta_us_per_byte > 0)
		snprintf(asym, sizeof(asym), "%.3f", 1e-3 / f->beta_us_per_byte);
	else
		snprintf(asym, sizeof(asym), "nan");
	return snprintf(buf, len, "fit,%s,%s,%d,%.3f,%.3f,%s,%.4f,%.4f,%.0f,%.0f,%d\n", impl, op,
	                ranks, f->alpha_us, f->beta_us_per_byte * 1024.0 * 1e3, asym, f->r2,
	                f->max_rel_err, f->min_bytes, f->max_bytes, f->sizes);
}

void bench_fit_usage(FILE *f, const char *in)
{
	fprintf(f,
	        "%s--fit             after each op's sweep, fit t(n) = alpha + beta*n to its\n"
	        "%s                  lat_us (least squares in relative error, so every size\n"
	        "%s                  counts alike) and print a row of the columns\n"
	        "%s                  # fit,impl,op,ranks,alpha_us,beta_ns_per_KiB,\n"
	        "%s                  asymptotic_GBps,r2,max_rel_err,min_bytes,max_bytes,sizes\n"
	        "%s                  alpha_us the fitted latency, beta_ns_per_KiB the time per\n"
	        "%s                  KiB, asymptotic_GBps = 1/beta (the algbw approached, nan\n"
	        "%s                  if beta <= 0), r2 and max_rel_err the fit's quality on the\n"
	        "%s                  relative scale, then the sizes fitted. Needs 2 sizes or\n"
	        "%s                  more; ops without a size (barrier) get no fit. Draw the\n"
	        "%s                  points and lines with scripts/fit-plot CSV PNG\n",
	        in, in, in, in, in, in, in, in, in, in, in);
}
