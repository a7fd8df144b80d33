/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json_body.c - what a device read's JSON body costs to make: as a jansson
 * tree dumped with JSON_COMPACT (as zeusd did before 2026-12-03) and with
 * the writer of src/common/jsonw.c (as it does now), side by side in one
 * run (docs/performance-history.md, "Bodies without a tree").
 *
 *   cc -O2 -std=c17 -Isrc -o json_body bench/json_body.c src/common/jsonw.c -ljansson
 *   ./json_body [ROUNDS]
 *
 * Two bodies: GET /cpu/get_cumulative_energy's for 2 packages and GET
 * /gpu/get_power's for 8 GPUs, with values that change every round (as
 * the energy counters do). Each body is made, its text freed, ROUNDS times
 * (default 200,000). Prints microseconds per body and the ratio; the two
 * ways' texts are compared once, so a figure never comes from different
 * output.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonw.h"

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char *
energy_tree(long i)
{
	json_t *map = json_object();
	char *s;

	for (unsigned p = 0; p < 2; p++) {
		char key[16];

		snprintf(key, sizeof(key), "%u", p);
		json_object_set_new(map, key, json_pack("{s:o,s:o}",
		    "cpu_energy_uj", json_integer(7579327000 + i),
		    "dram_energy_uj", json_integer(1234567000 + i)));
	}
	s = json_dumps(map, JSON_COMPACT);
	json_decref(map);
	return s;
}

static char *
energy_jsonw(long i)
{
	struct jsonw w;
	size_t len;

	jsonw_init(&w);
	jsonw_open(&w);
	for (unsigned p = 0; p < 2; p++) {
		jsonw_key_u(&w, p);
		jsonw_open(&w);
		jsonw_key_int(&w, "cpu_energy_uj", 7579327000 + i);
		jsonw_key_int(&w, "dram_energy_uj", 1234567000 + i);
		jsonw_close(&w);
	}
	jsonw_close(&w);
	return jsonw_finish(&w, &len);
}

static char *
power_tree(long i)
{
	json_t *map = json_object(), *body;
	char *s;

	for (unsigned g = 0; g < 8; g++) {
		char key[16];

		snprintf(key, sizeof(key), "%u", g);
		json_object_set_new(map, key, json_integer(250000 + i));
	}
	body = json_pack("{s:I,s:o}", "timestamp_ms",
	    (json_int_t)1764800000000 + i, "power_mw", map);
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	return s;
}

static char *
power_jsonw(long i)
{
	struct jsonw w;
	size_t len;

	jsonw_init(&w);
	jsonw_open(&w);
	jsonw_key_int(&w, "timestamp_ms", 1764800000000 + i);
	jsonw_key(&w, "power_mw");
	jsonw_open(&w);
	for (unsigned g = 0; g < 8; g++) {
		jsonw_key_u(&w, g);
		jsonw_int(&w, 250000 + i);
	}
	jsonw_close(&w);
	jsonw_close(&w);
	return jsonw_finish(&w, &len);
}

/* µs per body of make(i), freed each round */
static double
time_it(char *(*make)(long), long rounds)
{
	volatile size_t sink = 0;
	double t0 = now_s();

	for (long i = 0; i < rounds; i++) {
		char *s = make(i);

		if (s == NULL)
			abort();
		sink += (unsigned char)s[1];
		free(s);
	}
	(void)sink;
	return (now_s() - t0) / (double)rounds * 1e6;
}

static void
row(const char *name, char *(*tree)(long), char *(*jw)(long), long rounds)
{
	char *a = tree(42), *b = jw(42);
	double t, j;

	if (a == NULL || b == NULL || strcmp(a, b) != 0) {
		fprintf(stderr, "%s: the two ways differ:\n %s\n %s\n", name,
		    a ? a : "(null)", b ? b : "(null)");
		exit(1);
	}
	free(a);
	free(b);
	t = time_it(tree, rounds);
	j = time_it(jw, rounds);
	printf("%-28s jansson %.2f us  jsonw %.2f us  (%.2fx)\n", name, t, j,
	    j / t);
}

int
main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;

	if (rounds <= 0) {
		fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
		return 2;
	}
	row("energy, 2 packages", energy_tree, energy_jsonw, rounds);
	row("power, 8 GPUs", power_tree, power_jsonw, rounds);
	return 0;
}
