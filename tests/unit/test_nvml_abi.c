/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_nvml_abi.c - the simulator's ABI against our NVML declarations.
 *
 * Three checks, from the strongest:
 *   - build time: sim/nvml_sim.c includes src/devices/nvml_api.h and is
 *     built with -Wmissing-prototypes -Werror, so every function it exports
 *     is declared there with the same signature, or it does not build; the
 *     table below names each export through the declaration (sizeof of its
 *     address), so the list and the header cannot drift apart either; and
 *     the layouts and constants that NVIDIA's nvml.h fixes are asserted;
 *   - the exported symbol list of each build variant, read from the ELF
 *     dynamic symbol table, is exactly the expected one (nothing missing,
 *     no helper leaked without `static`);
 *   - each variant is loaded with dlopen(RTLD_NOW | RTLD_LOCAL) and called
 *     through typed pointers the way a foreign client (nvidia-ml-py, nvtop)
 *     does: size-probing calls, string buffers of the documented sizes, the
 *     old PCI layout not overrun.
 * NVML_SIM_PATH, NVML_SIM_NOMEM_PATH and NVML_SIM_LEGACY_PATH come from
 * meson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/nvml_api.h"

/* ------------------------------------------------------------------------
 * Layouts and constants of NVIDIA's nvml.h (x86-64 / aarch64 LP64).
 */

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t size");
_Static_assert(offsetof(nvmlPciInfo_t, domain) == 16, "pci domain");
_Static_assert(offsetof(nvmlPciInfo_t, bus) == 20, "pci bus");
_Static_assert(offsetof(nvmlPciInfo_t, device) == 24, "pci device");
_Static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28, "pci id");
_Static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32, "pci subsys");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "pci busId");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t size");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t size");
_Static_assert(offsetof(nvmlFieldValue_t, timestamp) == 8, "fv timestamp");
_Static_assert(offsetof(nvmlFieldValue_t, valueType) == 24, "fv valueType");
_Static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "fv return");
_Static_assert(offsetof(nvmlFieldValue_t, value) == 32, "fv value");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t size");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t size");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8, "mem v2 total");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 tag");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t size");
_Static_assert(sizeof(nvmlReturn_t) == 4 && sizeof(nvmlClockType_t) == 4 &&
    sizeof(nvmlEnableState_t) == 4 && sizeof(nvmlTemperatureSensors_t) == 4,
    "enums are int-sized");
_Static_assert(NVML_ERROR_GPU_IS_LOST == 15 && NVML_ERROR_UNKNOWN == 999 &&
    NVML_ERROR_INSUFFICIENT_SIZE == 7 && NVML_ERROR_NO_PERMISSION == 4,
    "return codes");
_Static_assert(NVML_CLOCK_MEM == 2 && NVML_DEVICE_ARCH_HOPPER == 9 &&
    NVML_FI_DEV_POWER_INSTANT == 186, "constants");

/* ------------------------------------------------------------------------
 * The exports of each variant.
 */

enum { V_FULL = 1, V_NOMEM = 2, V_LEGACY = 4, V_ALL = 7 };

struct export {
	const char *name;
	unsigned variants;
};

/* sizeof(&f): a name not declared in nvml_api.h does not compile. */
#define EXPORT(f, v) { #f + 0 * sizeof(&f), v }

static const struct export exports[] = {
	EXPORT(nvmlInit, V_ALL),
	EXPORT(nvmlInit_v2, V_FULL | V_NOMEM),
	EXPORT(nvmlInitWithFlags, V_FULL | V_NOMEM),
	EXPORT(nvmlShutdown, V_ALL),
	EXPORT(nvmlErrorString, V_ALL),
	EXPORT(nvmlSystemGetDriverVersion, V_ALL),
	EXPORT(nvmlSystemGetNVMLVersion, V_ALL),
	EXPORT(nvmlDeviceGetCount, V_ALL),
	EXPORT(nvmlDeviceGetCount_v2, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetHandleByIndex, V_ALL),
	EXPORT(nvmlDeviceGetHandleByIndex_v2, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetName, V_ALL),
	EXPORT(nvmlDeviceGetUUID, V_ALL),
	EXPORT(nvmlDeviceGetPciInfo, V_ALL),
	EXPORT(nvmlDeviceGetPciInfo_v2, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetPciInfo_v3, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetArchitecture, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetFieldValues, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetPowerUsage, V_ALL),
	EXPORT(nvmlDeviceGetTotalEnergyConsumption, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetPowerManagementLimit, V_ALL),
	EXPORT(nvmlDeviceGetPowerManagementLimitConstraints, V_ALL),
	EXPORT(nvmlDeviceGetPowerManagementDefaultLimit, V_ALL),
	EXPORT(nvmlDeviceGetEnforcedPowerLimit, V_ALL),
	EXPORT(nvmlDeviceGetPersistenceMode, V_ALL),
	EXPORT(nvmlDeviceGetClockInfo, V_ALL),
	EXPORT(nvmlDeviceGetMaxClockInfo, V_ALL),
	EXPORT(nvmlDeviceGetSupportedMemoryClocks, V_ALL),
	EXPORT(nvmlDeviceGetSupportedGraphicsClocks, V_ALL),
	EXPORT(nvmlDeviceGetMemoryInfo, V_ALL),
	EXPORT(nvmlDeviceGetMemoryInfo_v2, V_FULL | V_NOMEM),
	EXPORT(nvmlDeviceGetUtilizationRates, V_ALL),
	EXPORT(nvmlDeviceGetTemperature, V_ALL),
	EXPORT(nvmlDeviceSetPowerManagementLimit, V_ALL),
	EXPORT(nvmlDeviceSetPersistenceMode, V_ALL),
	EXPORT(nvmlDeviceSetGpuLockedClocks, V_ALL),
	EXPORT(nvmlDeviceResetGpuLockedClocks, V_ALL),
	EXPORT(nvmlDeviceSetMemoryLockedClocks, V_FULL),
	EXPORT(nvmlDeviceResetMemoryLockedClocks, V_FULL | V_NOMEM),
};

#define NEXPORTS (sizeof(exports) / sizeof(exports[0]))
#define MAX_SYMS 256

/*
 * The defined global functions in a shared object's dynamic symbol table,
 * one per line in `out` (64-bit ELF, what the build makes here).
 */
static unsigned
elf_exports(const char *path, char names[][64], unsigned max)
{
	struct stat st;
	const unsigned char *m;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	unsigned n = 0;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	eh = (const Elf64_Ehdr *)m;
	assert_memory_equal(eh->e_ident, ELFMAG, SELFMAG);
	assert_int_equal(eh->e_ident[EI_CLASS], ELFCLASS64);
	sh = (const Elf64_Shdr *)(m + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const Elf64_Sym *sym;
		const char *str;
		size_t count;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		sym = (const Elf64_Sym *)(m + sh[i].sh_offset);
		str = (const char *)(m + sh[sh[i].sh_link].sh_offset);
		count = sh[i].sh_size / sizeof(Elf64_Sym);
		for (size_t k = 0; k < count; k++) {
			unsigned bind = ELF64_ST_BIND(sym[k].st_info);

			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
			    sym[k].st_shndx == SHN_UNDEF ||
			    (bind != STB_GLOBAL && bind != STB_WEAK))
				continue;
			assert_true(n < max);
			snprintf(names[n++], 64, "%s", str + sym[k].st_name);
		}
	}
	munmap((void *)m, (size_t)st.st_size);
	return n;
}

static void
check_exports(const char *path, unsigned variant)
{
	static char names[MAX_SYMS][64];
	unsigned n = elf_exports(path, names, MAX_SYMS), want = 0;

	/* Every export is expected... */
	for (unsigned i = 0; i < n; i++) {
		bool ok = strcmp(names[i], "_init") == 0 ||
		    strcmp(names[i], "_fini") == 0;

		for (size_t k = 0; k < NEXPORTS && !ok; k++)
			ok = strcmp(names[i], exports[k].name) == 0 &&
			    (exports[k].variants & variant);
		if (!ok)
			fail_msg("%s exports unexpected %s", path, names[i]);
	}
	/* ...and every expected one is exported. */
	for (size_t k = 0; k < NEXPORTS; k++) {
		bool found = false;

		if (!(exports[k].variants & variant))
			continue;
		want++;
		for (unsigned i = 0; i < n && !found; i++)
			found = strcmp(names[i], exports[k].name) == 0;
		if (!found)
			fail_msg("%s lacks %s", path, exports[k].name);
	}
	assert_true(want >= 27);
}

static void
test_export_lists(void **state)
{
	check_exports(NVML_SIM_PATH, V_FULL);
	check_exports(NVML_SIM_NOMEM_PATH, V_NOMEM);
	check_exports(NVML_SIM_LEGACY_PATH, V_LEGACY);
}

/* ------------------------------------------------------------------------
 * Called as a foreign client calls it.
 */

static void *
must_sym(void *dl, const char *name)
{
	void *p;

	dlerror();
	p = dlsym(dl, name);
	if (p == NULL)
		fail_msg("dlsym(%s): %s", name, dlerror());
	return p;
}

/* A typed pointer to an export, by its declaration's type. */
#define SYM(dl, f) ((__typeof__(&f))must_sym(dl, #f))

static int
setup(void **state)
{
	unsetenv("ZEUS_SIM_LOG");
	unsetenv("ZEUS_SIM_CONTROL");
	unsetenv("ZEUS_SIM_FAULTS");
	unsetenv("ZEUS_SIM_GPU_NAME");
	unsetenv("ZEUS_SIM_PCI");
	unsetenv("ZEUS_SIM_DRIVER_VERSION");
	setenv("ZEUS_SIM_PROFILE", "h100,v100", 1);
	setenv("ZEUS_SIM_GPUS", "2", 1);
	return 0;
}

static void
test_foreign_client_full(void **state)
{
	void *dl = dlopen(NVML_SIM_PATH, RTLD_NOW | RTLD_LOCAL);
	char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	unsigned char raw[sizeof(nvmlPciInfo_t)];
	unsigned int n, v, clocks[512], lo, hi;
	nvmlDeviceArchitecture_t arch;
	nvmlDevice_t h0, h1;
	nvmlPciInfo_t pci;
	nvmlMemory_t mem;
	nvmlMemory_v2_t mem2;
	nvmlUtilization_t util;

	assert_non_null(dl);
	/* Before init, as NVML: uninitialized. */
	assert_int_equal(SYM(dl, nvmlDeviceGetCount_v2)(&n),
	    NVML_ERROR_UNINITIALIZED);
	assert_int_equal(SYM(dl, nvmlInitWithFlags)(0), NVML_SUCCESS);
	assert_int_equal(SYM(dl, nvmlSystemGetDriverVersion)(buf,
	    NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE), NVML_SUCCESS);
	assert_string_equal(buf, "570.124.06");
	assert_int_equal(SYM(dl, nvmlSystemGetDriverVersion)(buf, 4),
	    NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(SYM(dl, nvmlSystemGetNVMLVersion)(buf,
	    NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE), NVML_SUCCESS);
	assert_string_equal(buf, "12.570.124.06");
	assert_int_equal(SYM(dl, nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
	assert_int_equal(n, 2);
	assert_int_equal(SYM(dl, nvmlDeviceGetHandleByIndex_v2)(0, &h0), 0);
	assert_int_equal(SYM(dl, nvmlDeviceGetHandleByIndex)(1, &h1), 0);
	assert_int_equal(SYM(dl, nvmlDeviceGetHandleByIndex_v2)(2, &h1),
	    NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(SYM(dl, nvmlDeviceGetHandleByIndex)(1, &h1), 0);

	assert_int_equal(SYM(dl, nvmlDeviceGetName)(h0, buf,
	    NVML_DEVICE_NAME_V2_BUFFER_SIZE), NVML_SUCCESS);
	assert_string_equal(buf, "NVIDIA H100 80GB HBM3");
	assert_int_equal(SYM(dl, nvmlDeviceGetUUID)(h1, buf,
	    NVML_DEVICE_UUID_V2_BUFFER_SIZE), NVML_SUCCESS);
	assert_int_equal(strlen(buf), 40);
	assert_memory_equal(buf, "GPU-", 4);
	assert_int_equal(SYM(dl, nvmlDeviceGetUUID)(h1, buf, 10),
	    NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(SYM(dl, nvmlDeviceGetArchitecture)(h0, &arch), 0);
	assert_int_equal(arch, NVML_DEVICE_ARCH_HOPPER);
	assert_int_equal(SYM(dl, nvmlDeviceGetArchitecture)(h1, &arch), 0);
	assert_int_equal(arch, NVML_DEVICE_ARCH_VOLTA);

	/* The current layout, then the oldest one: 52 bytes, no more. */
	assert_int_equal(SYM(dl, nvmlDeviceGetPciInfo_v3)(h1, &pci), 0);
	assert_int_equal(pci.bus, 2);
	assert_string_equal(pci.busId, "00000000:02:00.0");
	assert_int_equal(pci.pciDeviceId, 0x1db510de);
	memset(raw, 0xa5, sizeof(raw));
	assert_int_equal(SYM(dl, nvmlDeviceGetPciInfo)(h1,
	    (nvmlPciInfo_t *)raw), 0);
	memcpy(&pci, raw, sizeof(pci));
	assert_int_equal(pci.bus, 2);
	assert_string_equal(pci.busIdLegacy, "0000:02:00.0");
	for (size_t i = 52; i < sizeof(raw); i++)
		assert_int_equal(raw[i], 0xa5);

	/* Limits: V100-like. */
	assert_int_equal(SYM(dl, nvmlDeviceGetPowerManagementLimitConstraints)(
	    h1, &lo, &hi), 0);
	assert_int_equal(lo, 150000);
	assert_int_equal(hi, 300000);
	assert_int_equal(SYM(dl, nvmlDeviceGetPowerManagementDefaultLimit)(h1,
	    &v), 0);
	assert_int_equal(v, 300000);
	assert_int_equal(SYM(dl, nvmlDeviceSetPowerManagementLimit)(h1,
	    200000), 0);
	assert_int_equal(SYM(dl, nvmlDeviceGetEnforcedPowerLimit)(h1, &v), 0);
	assert_int_equal(v, 200000);
	assert_int_equal(SYM(dl, nvmlDeviceSetPowerManagementLimit)(h1,
	    400000), NVML_ERROR_INVALID_ARGUMENT);

	/* Clock tables, asked size first as the Python binding does. */
	n = 0;
	assert_int_equal(SYM(dl, nvmlDeviceGetSupportedMemoryClocks)(h0, &n,
	    NULL), NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 1);
	assert_int_equal(SYM(dl, nvmlDeviceGetSupportedMemoryClocks)(h0, &n,
	    clocks), 0);
	assert_int_equal(clocks[0], 2619);
	n = 0;
	assert_int_equal(SYM(dl, nvmlDeviceGetSupportedGraphicsClocks)(h0, 2619,
	    &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 110);
	assert_int_equal(SYM(dl, nvmlDeviceGetSupportedGraphicsClocks)(h0, 2619,
	    &n, clocks), 0);
	assert_int_equal(clocks[0], 1980);
	assert_int_equal(clocks[n - 1], 345);
	assert_true(clocks[1] < clocks[0]);
	assert_int_equal(SYM(dl, nvmlDeviceGetSupportedGraphicsClocks)(h0, 1234,
	    &n, clocks), NVML_ERROR_NOT_FOUND);
	assert_int_equal(SYM(dl, nvmlDeviceGetMaxClockInfo)(h0,
	    NVML_CLOCK_GRAPHICS, &v), 0);
	assert_int_equal(v, 1980);
	assert_int_equal(SYM(dl, nvmlDeviceGetMaxClockInfo)(h0, NVML_CLOCK_MEM,
	    &v), 0);
	assert_int_equal(v, 2619);
	assert_int_equal(SYM(dl, nvmlDeviceGetClockInfo)(h0, NVML_CLOCK_SM,
	    &v), 0);
	assert_true(v >= 345 && v <= 1980);
	assert_int_equal(SYM(dl, nvmlDeviceGetClockInfo)(h0,
	    (nvmlClockType_t)9, &v), NVML_ERROR_INVALID_ARGUMENT);

	/* Memory, utilization, temperature. */
	assert_int_equal(SYM(dl, nvmlDeviceGetMemoryInfo)(h0, &mem), 0);
	assert_true(mem.total == 80ULL << 30);
	assert_true(mem.used + mem.free == mem.total);
	memset(&mem2, 0, sizeof(mem2));
	assert_int_equal(SYM(dl, nvmlDeviceGetMemoryInfo_v2)(h0, &mem2),
	    NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	mem2.version = nvmlMemory_v2;
	assert_int_equal(SYM(dl, nvmlDeviceGetMemoryInfo_v2)(h0, &mem2), 0);
	assert_true(mem2.reserved + mem2.used + mem2.free == mem2.total);
	assert_int_equal(SYM(dl, nvmlDeviceGetUtilizationRates)(h0, &util), 0);
	assert_true(util.gpu <= 100 && util.memory <= 100);
	assert_int_equal(SYM(dl, nvmlDeviceGetTemperature)(h0,
	    NVML_TEMPERATURE_GPU, &v), 0);
	assert_true(v >= 30 && v <= 85);

	/* What a V100 does not do. */
	assert_int_equal(SYM(dl, nvmlDeviceSetMemoryLockedClocks)(h1, 877,
	    877), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(SYM(dl, nvmlDeviceSetMemoryLockedClocks)(h0, 2619,
	    2619), NVML_SUCCESS);
	assert_string_equal(SYM(dl, nvmlErrorString)(NVML_ERROR_NOT_SUPPORTED),
	    "Not Supported");
	assert_int_equal(SYM(dl, nvmlShutdown)(), NVML_SUCCESS);
	assert_int_equal(SYM(dl, nvmlDeviceGetCount)(&n),
	    NVML_ERROR_UNINITIALIZED);
	dlclose(dl);
}

static void
test_foreign_client_legacy(void **state)
{
	void *dl = dlopen(NVML_SIM_LEGACY_PATH, RTLD_NOW | RTLD_LOCAL);
	char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	unsigned int n, mw;
	nvmlDevice_t h;

	assert_non_null(dl);
	assert_null(dlsym(dl, "nvmlInit_v2"));
	assert_null(dlsym(dl, "nvmlDeviceGetTotalEnergyConsumption"));
	assert_int_equal(SYM(dl, nvmlInit)(), NVML_SUCCESS);
	assert_int_equal(SYM(dl, nvmlSystemGetDriverVersion)(buf, sizeof(buf)),
	    0);
	assert_string_equal(buf, "450.80.02");
	assert_int_equal(SYM(dl, nvmlDeviceGetCount)(&n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(SYM(dl, nvmlDeviceGetHandleByIndex)(0, &h), 0);
	assert_int_equal(SYM(dl, nvmlDeviceGetPowerUsage)(h, &mw), 0);
	assert_true(mw > 1000);
	assert_int_equal(SYM(dl, nvmlShutdown)(), NVML_SUCCESS);
	dlclose(dl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_export_lists),
		cmocka_unit_test_setup(test_foreign_client_full, setup),
		cmocka_unit_test_setup(test_foreign_client_legacy, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
