/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_sim_faults.c - the simulators' fault-rule parser (sim/faults.c):
 * ZEUS_SIM_FAULTS and control-file text, in both dialects' strictness.
 * Checks what the parser promises: never more than SIM_MAX_RULES rules,
 * and every rule's fields inside the dialect's bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"

static const char *const fns[] = { "nvmlInit_v2", "nvmlDeviceGetPowerUsage",
    "amdsmi_get_power_info" };

static const struct sim_code codes[] = {
	{ 0, "SUCCESS", "Success" },
	{ 3, "NOT_SUPPORTED", "Not supported" },
	{ 999, "UNKNOWN", NULL },
};

static const struct sim_dialect dialects[2] = {
	{ .tag = "fuzz-sim", .fns = fns, .nfns = 3, .codes = codes,
	  .ncodes = 3, .prefix = "NVML_ERROR_", .success = "NVML_SUCCESS",
	  .code_max = 999, .gpu_max = 63, .other = NULL, .strict = true },
	{ .tag = "fuzz-sim", .fns = fns, .nfns = 3, .codes = codes,
	  .ncodes = 3, .prefix = "AMDSMI_STATUS_", .success = NULL,
	  .code_max = 0xFFFFFFFFu, .gpu_max = 15, .other = "OTHER",
	  .strict = false, .extra_words = true, .control_live = true },
};

static void
check(const struct sim_dialect *d, const struct sim_rules *r)
{
	if (r->n > SIM_MAX_RULES)
		abort();
	for (unsigned i = 0; i < r->n; i++) {
		const struct sim_rule *x = &r->r[i];

		if ((x->kind != SIM_FAIL && x->kind != SIM_DELAY) ||
		    x->fn < -1 || x->fn >= (int)d->nfns || x->gpu < -1 ||
		    (x->gpu >= 0 && (unsigned)x->gpu > d->gpu_max) ||
		    (x->kind == SIM_FAIL && x->code > d->code_max))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sim_rules rules;
	const struct sim_dialect *d;
	char *text;

	if (size < 1 || size > 64 * 1024)
		return 0;
	d = &dialects[data[0] & 1];
	if ((text = malloc(size)) == NULL)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	rules.n = 0;
	(void)sim_rules_parse(d, text, (data[0] & 2) ? ";\n" : "\n",
	    (data[0] & 4) != 0, &rules);
	check(d, &rules);
	/* one line alone, as the control file hands them over */
	if (size - 1 < SIM_RULE_MAX && strchr(text, '\n') == NULL) {
		rules.n = 0;
		(void)sim_rule_parse(d, text, &rules);
		check(d, &rules);
	}
	free(text);
	return 0;
}
