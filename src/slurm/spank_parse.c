/* SPDX-License-Identifier: Apache-2.0 */
/* spank_parse.c - the Slurm plugin's parsers (spank_parse.h). */
#include "slurm/spank_parse.h"

#include <stdio.h>
#include <string.h>

int
spank_parse_conf(int ac, char *const *av, struct spank_conf *c, char *why)
{
	bool socket_seen = false;

	snprintf(c->socket, sizeof(c->socket), "%s", SPANK_SOCKET_DEFAULT);
	c->required = false;
	for (int i = 0; i < ac; i++) {
		const char *a = av[i];

		if (strcmp(a, "required") == 0) {
			if (c->required)
				goto twice;
			c->required = true;
		} else if (strncmp(a, "socket=", 7) == 0) {
			size_t len = strlen(a + 7);

			if (socket_seen)
				goto twice;
			socket_seen = true;
			if (a[7] != '/' || len >= sizeof(c->socket)) {
				snprintf(why, SPANK_WHY_MAX, "socket= needs an "
				    "absolute path of at most %zu bytes",
				    sizeof(c->socket) - 1);
				return -1;
			}
			memcpy(c->socket, a + 7, len + 1);
		} else {
			snprintf(why, SPANK_WHY_MAX, "unknown argument '%.40s' "
			    "(known: socket=PATH, required)", a);
			return -1;
		}
		continue;
twice:
		snprintf(why, SPANK_WHY_MAX, "argument '%.40s' given twice", a);
		return -1;
	}
	return 0;
}

/* One element [s, e) without its spaces: a decimal index. 0 or -1. */
static int
spank_gpu_id(const char *s, const char *e, unsigned *id)
{
	unsigned v = 0;

	while (s < e && *s == ' ')
		s++;
	while (e > s && e[-1] == ' ')
		e--;
	if (s == e || e - s > 5 || (*s == '0' && e - s > 1))
		return -1;
	for (; s < e; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > SPANK_GPU_ID_MAX)
		return -1;
	*id = v;
	return 0;
}

int
spank_parse_gpus(const char *s, unsigned *ids, size_t *n, char *why)
{
	const char *p = s;

	*n = 0;
	if (s[strspn(s, " ")] == '\0')
		return 0;
	for (;;) {
		const char *e = strchr(p, ',');
		unsigned id;
		size_t i;

		if (e == NULL)
			e = p + strlen(p);
		if (spank_gpu_id(p, e, &id) != 0) {
			snprintf(why, SPANK_WHY_MAX, "'%.*s' is not a GPU index "
			    "(0..%u)", (int)(e - p > 40 ? 40 : e - p), p,
			    SPANK_GPU_ID_MAX);
			return -1;
		}
		for (i = 0; i < *n && ids[i] != id; i++)
			;
		if (i == *n) {
			if (*n == SPANK_GPUS_MAX) {
				snprintf(why, SPANK_WHY_MAX, "more than %d GPUs",
				    SPANK_GPUS_MAX);
				return -1;
			}
			ids[(*n)++] = id;
		}
		if (*e == '\0')
			return 0;
		p = e + 1;
	}
}

void
spank_step_label(char *buf, size_t size, uint32_t job, uint32_t step)
{
	/* Slurm's special step ids (slurm.h: SLURM_BATCH_SCRIPT, ...) */
	static const struct { uint32_t id; const char *name; } special[] = {
		{ 0xfffffffbu, "batch" },
		{ 0xfffffffcu, "extern" },
		{ 0xfffffffau, "interactive" },
	};

	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (step == special[i].id) {
			snprintf(buf, size, "slurm:%u.%s", job, special[i].name);
			return;
		}
	if (step >= 0xfffffff0u)
		snprintf(buf, size, "slurm:%u.special-%u", job,
		    0xffffffffu - step);
	else
		snprintf(buf, size, "slurm:%u.%u", job, step);
}
