/* net.c - placeholder until the transport lands: every multi-node job fails. */
#include <errno.h>
#include <stdio.h>

#include "lib/net.h"

int shmcoll__net_open(const struct shmcoll_net_cfg *cfg, struct shmcoll_net **out, char *err,
		      size_t errlen)
{
	(void)cfg;
	*out = NULL;
	snprintf(err, errlen, "the inter-node transport is not built yet");
	return -ENOTSUP;
}

void shmcoll__net_close(struct shmcoll_net *n)
{
	(void)n;
}

void shmcoll__net_shutdown(struct shmcoll_net *n)
{
	(void)n;
}

const char *shmcoll__net_kind_name(const struct shmcoll_net *n)
{
	(void)n;
	return "none";
}

int shmcoll__net_run(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, char *err,
		     size_t errlen)
{
	(void)n;
	(void)x;
	(void)nx;
	snprintf(err, errlen, "the inter-node transport is not built yet");
	return -ENOTSUP;
}
