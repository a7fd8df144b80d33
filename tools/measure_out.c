/* SPDX-License-Identifier: Apache-2.0 */
/*
 * measure_out.c - `zeus measure`'s report as text, one JSON object or CSV
 * (measure_out.h). Numbers go through fmt_num (tool.h), as the settings'
 * report does (measure_cap.c).
 */
#include "measure_out.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static double
meas_total(const struct zeus_measurement *m)
{
	double total = 0;

	for (size_t i = 0; i < m->gpu_count; i++)
		total += m->gpu[i].joules;
	for (size_t i = 0; i < m->cpu_count; i++)
		total += m->cpu[i].joules;
	for (size_t i = 0; i < m->dram_count; i++)
		total += m->dram[i].joules;
	return total;
}

/* With GPU settings (cap), each GPU's average power and the settings'
 * report too. */
void
measure_print_text(FILE *f, const struct zeus_measurement *m, int status,
    const struct cap *cap)
{
	fprintf(f, "zeus: time %.3f s\n", m->time_s);
	for (size_t i = 0; i < m->gpu_count; i++) {
		fprintf(f, "zeus: gpu %u %.3f J", m->gpu[i].index,
		    m->gpu[i].joules);
		if (cap != NULL && m->time_s > 0)
			fprintf(f, ", %.1f W average",
			    m->gpu[i].joules / m->time_s);
		fputc('\n', f);
	}
	for (size_t i = 0; i < m->cpu_count; i++)
		fprintf(f, "zeus: cpu %u %.3f J\n", m->cpu[i].index,
		    m->cpu[i].joules);
	for (size_t i = 0; i < m->dram_count; i++)
		fprintf(f, "zeus: dram %u %.3f J\n", m->dram[i].index,
		    m->dram[i].joules);
	fprintf(f, "zeus: total %.3f J (exit status %d)\n", meas_total(m),
	    status);
	if (cap != NULL)
		cap_print_text(f, cap, m);
}

static void
json_energy(FILE *f, const char *key, const struct zeus_energy *e, size_t n)
{
	char num[64];

	fprintf(f, ",\"%s\":{", key);
	for (size_t i = 0; i < n; i++) {
		fmt_num(num, sizeof(num), e[i].joules, J_DECIMALS, "null");
		fprintf(f, "%s\"%u\":%s", i ? "," : "", e[i].index, num);
	}
	fputc('}', f);
}

/* A JSON string; bytes that are not UTF-8 become '?'. */
static void
json_str(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *out;

	if (j == NULL) {
		char ascii[ZEUS_ERR_MSG_MAX];
		size_t i;

		for (i = 0; s[i] != '\0' && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
		ascii[i] = '\0';
		j = json_string(ascii);
	}
	out = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	fputs(out != NULL ? out : "null", f);
	free(out);
	json_decref(j);
}

void
measure_print_json(FILE *f, const struct zeus_measurement *m, int status,
    const char *push_error, const struct cap *cap)
{
	char num[64];

	fmt_num(num, sizeof(num), m->time_s, S_DECIMALS, "null");
	fprintf(f, "{\"time_s\":%s", num);
	json_energy(f, "gpu_energy_j", m->gpu, m->gpu_count);
	json_energy(f, "cpu_energy_j", m->cpu, m->cpu_count);
	json_energy(f, "dram_energy_j", m->dram, m->dram_count);
	fmt_num(num, sizeof(num), meas_total(m), J_DECIMALS, "null");
	fprintf(f, ",\"total_energy_j\":%s,\"exit_status\":%d"
	    ",\"push_error\":", num, status);
	if (push_error != NULL)
		json_str(f, push_error);
	else
		fputs("null", f);
	if (cap != NULL) {
		fputs(",\"gpu_avg_w\":{", f);
		for (size_t i = 0; i < m->gpu_count; i++) {
			fmt_num(num, sizeof(num), m->time_s > 0 ?
			    m->gpu[i].joules / m->time_s : NAN, J_DECIMALS,
			    "null");
			fprintf(f, "%s\"%u\":%s", i ? "," : "",
			    m->gpu[i].index, num);
		}
		fputc('}', f);
		cap_print_json(f, cap, m);
	}
	fputs("}\n", f);
}

/* A CSV field (RFC 4180): quoted when it holds , " CR or LF. */
static void
csv_str(FILE *f, const char *s)
{
	if (strpbrk(s, ",\"\r\n") == NULL) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void
csv_energy(FILE *f, const struct zeus_energy *e, size_t n, const char *kind,
    bool header)
{
	char num[64];

	for (size_t i = 0; i < n; i++) {
		if (header) {
			fprintf(f, ",%s%u_j", kind, e[i].index);
		} else {
			fmt_num(num, sizeof(num), e[i].joules, J_DECIMALS, "");
			fprintf(f, ",%s", num);
		}
	}
}

/* The header line, then one row per window (measure has one). */
void
measure_print_csv(FILE *f, const char *window,
    const struct zeus_measurement *m, int status, const struct cap *cap)
{
	char num[64];

	fputs("window,time_s", f);
	csv_energy(f, m->gpu, m->gpu_count, "gpu", true);
	csv_energy(f, m->cpu, m->cpu_count, "cpu", true);
	csv_energy(f, m->dram, m->dram_count, "dram", true);
	fputs(",total_j,exit_status", f);
	if (cap != NULL)
		cap_print_csv(f, cap, true);
	fputc('\n', f);
	csv_str(f, window);
	fmt_num(num, sizeof(num), m->time_s, S_DECIMALS, "");
	fprintf(f, ",%s", num);
	csv_energy(f, m->gpu, m->gpu_count, "gpu", false);
	csv_energy(f, m->cpu, m->cpu_count, "cpu", false);
	csv_energy(f, m->dram, m->dram_count, "dram", false);
	fmt_num(num, sizeof(num), meas_total(m), J_DECIMALS, "");
	fprintf(f, ",%s,%d", num, status);
	if (cap != NULL)
		cap_print_csv(f, cap, false);
	fputc('\n', f);
}
