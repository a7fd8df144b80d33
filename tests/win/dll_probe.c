/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dll_probe.c - a program linked against zeus.dll (not the static
 * libzeus): prints zeus_version() and whether a zeusd is configured in the
 * environment (zeus_client_env_configured), so that test_windows.py sees
 * the DLL load and answer under wine.
 */
#include <stdio.h>

#include "zeus/client.h"
#include "zeus/zeus.h"

int
main(void)
{
	printf("version=%s env_configured=%d\n", zeus_version(),
	    (int)zeus_client_env_configured());
	return 0;
}
