/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_json.c - the energy ledger's answers as C structs (lease_json.h).
 *
 * Every field is checked for its type and range, as the other reads of
 * client.c are: a record that does not hold together (energy "ok" without
 * a number, a negative duration, an unknown state) makes the whole answer
 * an error rather than a half-filled struct. Strings are cut to their
 * field at a character boundary; settings names this version does not
 * know are skipped, so a newer zeusd's additions do not break it. Lists
 * longer than the structs hold are errors, but for ended leases, which
 * come newest first: the oldest beyond ZEUS_LEASES_ENDED_MAX are dropped.
 */
#include "lease_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *
zeus_lease_state_name(enum zeus_lease_state s)
{
	switch (s) {
	case ZEUS_LEASE_HELD: return "held";
	case ZEUS_LEASE_RESTORING: return "restoring";
	case ZEUS_LEASE_ENDED: return "ended";
	}
	return "?";
}

const char *
zeus_lease_energy_name(enum zeus_lease_energy e)
{
	switch (e) {
	case ZEUS_LEASE_ENERGY_OK: return "ok";
	case ZEUS_LEASE_ENERGY_UNAVAILABLE: return "unavailable";
	case ZEUS_LEASE_ENERGY_PENDING: return "pending";
	}
	return "?";
}

/*
 * A string field into dst: null or absent gives "" (when `nullable`), a
 * string is copied and cut to fit, never inside a UTF-8 sequence.
 */
static int
lease_str(json_t *obj, const char *field, char *dst, size_t size,
    bool nullable)
{
	json_t *v = json_object_get(obj, field);
	const char *s;
	size_t n;

	dst[0] = '\0';
	if (v == NULL || json_is_null(v))
		return nullable ? 0 : -1;
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	n = json_string_length(v);
	if (memchr(s, '\0', n) != NULL)
		return -1;	/* "\u0000" would cut it silently */
	if (n >= size) {
		n = size - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;	/* s[n] starts the character that did not fit */
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

/* An integer field in [0, max]. */
static int
lease_uint(json_t *obj, const char *field, json_int_t max, json_int_t *out)
{
	json_t *v = json_object_get(obj, field);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > max)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* A finite number >= 0, or null (*has = false). */
static int
lease_num_or_null(json_t *obj, const char *field, double *out, bool *has)
{
	json_t *v = json_object_get(obj, field);

	*has = false;
	*out = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
	    json_number_value(v) < 0)
		return -1;
	*out = json_number_value(v);
	*has = true;
	return 0;
}

static int
lease_state(const char *s, enum zeus_lease_state *out)
{
	static const char *const names[] = { "held", "restoring", "ended" };

	for (unsigned i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (enum zeus_lease_state)i;
			return 0;
		}
	return -1;
}

static int
lease_energy(const char *s, enum zeus_lease_energy *out)
{
	static const char *const names[] = { "ok", "unavailable", "pending" };

	for (unsigned i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (enum zeus_lease_energy)i;
			return 0;
		}
	return -1;
}

static int
lease_settings(json_t *arr, unsigned *out)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{ "power_limit", ZEUS_SETTING_POWER_LIMIT },
		{ "persistence", ZEUS_SETTING_PERSISTENCE },
		{ "gpu_clocks", ZEUS_SETTING_GPU_CLOCKS },
		{ "mem_clocks", ZEUS_SETTING_MEM_CLOCKS },
	};
	size_t i;
	json_t *v;

	*out = 0;
	if (!json_is_array(arr))
		return -1;
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v))
			return -1;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (strcmp(json_string_value(v), names[k].name) == 0)
				*out |= names[k].bit;
	}
	return 0;
}

int
lease_json_record(json_t *v, struct zeus_lease *r)
{
	char state[16], energy[16];
	json_int_t n;
	bool has_j, has_d;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(v))
		return -1;
	if (lease_uint(v, "gpu", 0xffffffffLL, &n) != 0)
		return -1;
	r->gpu = (unsigned)n;
	if (lease_uint(v, "uid", 0xffffffffLL, &n) != 0)
		return -1;
	r->uid = (uint32_t)n;
	if (lease_uint(v, "pid", 0x7fffffffLL, &n) != 0)
		return -1;
	r->pid = (int64_t)n;
	if (lease_str(v, "user", r->user, sizeof(r->user), true) != 0 ||
	    lease_str(v, "cgroup", r->cgroup, sizeof(r->cgroup), true) != 0 ||
	    lease_str(v, "label", r->label, sizeof(r->label), true) != 0 ||
	    lease_str(v, "reason", r->reason, sizeof(r->reason), true) != 0 ||
	    lease_str(v, "state", state, sizeof(state), false) != 0 ||
	    lease_state(state, &r->state) != 0 ||
	    lease_str(v, "energy", energy, sizeof(energy), false) != 0 ||
	    lease_energy(energy, &r->energy) != 0)
		return -1;
	if (lease_num_or_null(v, "start", &r->start, &r->has_start) != 0 ||
	    lease_num_or_null(v, "end", &r->end, &r->has_end) != 0 ||
	    lease_num_or_null(v, "duration_s", &r->duration_s, &has_d) != 0 ||
	    !has_d ||
	    lease_num_or_null(v, "energy_j", &r->energy_j, &has_j) != 0 ||
	    lease_num_or_null(v, "avg_w", &r->avg_w, &r->has_avg_w) != 0)
		return -1;
	/* the two ways of saying whether there is a figure must agree */
	if (has_j != (r->energy == ZEUS_LEASE_ENERGY_OK))
		return -1;
	if (r->has_end != (r->state == ZEUS_LEASE_ENDED))
		return -1;
	return lease_settings(json_object_get(v, "settings"), &r->settings);
}

/* A JSON array of records into out[max]; `cut`: drop what does not fit. */
static int
lease_records(json_t *arr, struct zeus_lease *out, size_t max, bool cut,
    size_t *count)
{
	size_t i;
	json_t *v;

	*count = 0;
	if (!json_is_array(arr) || (!cut && json_array_size(arr) > max))
		return -1;
	json_array_foreach(arr, i, v) {
		if (i == max)
			break;
		if (lease_json_record(v, &out[i]) != 0)
			return -1;
		*count = i + 1;
	}
	return 0;
}

int
lease_json_leases(json_t *j, struct zeus_leases *out)
{
	json_t *un, *v;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j) ||
	    lease_records(json_object_get(j, "leases"), out->leases,
	    ZEUS_MAX_DEVICES, false, &out->count) != 0 ||
	    lease_records(json_object_get(j, "ended"), out->ended,
	    ZEUS_LEASES_ENDED_MAX, true, &out->ended_count) != 0)
		return -1;
	un = json_object_get(j, "unleased");
	if (!json_is_array(un) || json_array_size(un) > ZEUS_MAX_DEVICES)
		return -1;
	json_array_foreach(un, i, v) {
		struct zeus_unleased *u = &out->unleased[i];
		json_int_t gpu;

		if (!json_is_object(v) ||
		    lease_uint(v, "gpu", 0xffffffffLL, &gpu) != 0 ||
		    lease_num_or_null(v, "energy_j", &u->energy_j,
		    &u->has_energy) != 0)
			return -1;
		u->gpu = (unsigned)gpu;
		out->unleased_count = i + 1;
	}
	return 0;
}

int
lease_json_release(json_t *j, struct zeus_release *out)
{
	json_t *nl, *v;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j) ||
	    lease_records(json_object_get(j, "released"), out->released,
	    ZEUS_MAX_DEVICES, false, &out->count) != 0)
		return -1;
	nl = json_object_get(j, "not_leased");
	if (!json_is_array(nl) || json_array_size(nl) > ZEUS_MAX_DEVICES)
		return -1;
	json_array_foreach(nl, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0xffffffffLL)
			return -1;
		out->not_leased[i] = (unsigned)json_integer_value(v);
		out->not_leased_count = i + 1;
	}
	return 0;
}
