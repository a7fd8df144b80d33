/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wfile_win.c - wfile.h: CreateFileW on the UTF-8 path, ReadFile, and the
 * DACL check that stands in for Linux's owner and mode check: whoever can
 * write the file can make zeusd run commands or mint tokens.
 */
#include "common/wfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include <aclapi.h>
#include <sddl.h>

#define WFILE_PATH_MAX 1024

/* what lets a trustee change the file's contents or its DACL */
#define WFILE_WRITE_RIGHTS (FILE_WRITE_DATA | FILE_APPEND_DATA | WRITE_DAC | \
	WRITE_OWNER | DELETE | GENERIC_WRITE | GENERIC_ALL)

const char *
wfile_error(unsigned long code, char *buf, size_t size)
{
	DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM |
	    FORMAT_MESSAGE_IGNORE_INSERTS, NULL, (DWORD)code, 0, buf,
	    (DWORD)size, NULL);

	while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n' ||
	    buf[n - 1] == '.'))
		buf[--n] = '\0';
	if (n == 0)
		snprintf(buf, size, "error %lu", code);
	return buf;
}

/* The SID of the account zeusd runs as (a buffer the caller frees). */
static PSID
wfile_own_sid(void)
{
	HANDLE tok;
	DWORD n = 0;
	TOKEN_USER *tu = NULL;

	if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok))
		return NULL;
	(void)GetTokenInformation(tok, TokenUser, NULL, 0, &n);
	if (n == 0 || n > 4096 || (tu = malloc(n)) == NULL ||
	    !GetTokenInformation(tok, TokenUser, tu, n, &n)) {
		free(tu);
		CloseHandle(tok);
		return NULL;
	}
	CloseHandle(tok);
	return (PSID)tu;	/* the SID is reached through tu->User.Sid */
}

/* SYSTEM, Administrators, TrustedInstaller, or zeusd's own account. */
static bool
wfile_sid_trusted(PSID sid, const TOKEN_USER *own)
{
	static const char *const trusted[] = { "S-1-5-18", "S-1-5-32-544",
	    "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464" };
	PSID t;
	bool same;

	if (own != NULL && EqualSid(sid, own->User.Sid))
		return true;
	for (size_t i = 0; i < sizeof(trusted) / sizeof(trusted[0]); i++) {
		if (!ConvertStringSidToSidA(trusted[i], &t))
			continue;
		same = EqualSid(sid, t);
		LocalFree(t);
		if (same)
			return true;
	}
	return false;
}

static int
wfile_check_dacl(HANDLE h, const char *path, const char *what,
    struct zerr *err)
{
	PSECURITY_DESCRIPTOR sd = NULL;
	PACL dacl = NULL;
	TOKEN_USER *own;
	char why[160], *name = NULL;
	DWORD rc;
	int ret = 0;

	rc = GetSecurityInfo(h, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION,
	    NULL, NULL, &dacl, NULL, &sd);
	if (rc != ERROR_SUCCESS)
		return zerr_set(err, ZERR_FORBIDDEN, "%s '%.400s': cannot read "
		    "its access control list: %s", what, path,
		    wfile_error(rc, why, sizeof(why)));
	if (dacl == NULL) {
		LocalFree(sd);
		return zerr_set(err, ZERR_FORBIDDEN, "%s '%.400s' has no access "
		    "control list, so anyone may write it; refusing it", what,
		    path);
	}
	own = (TOKEN_USER *)wfile_own_sid();
	for (DWORD i = 0; i < dacl->AceCount && ret == 0; i++) {
		ACE_HEADER *ace;
		ACCESS_ALLOWED_ACE *allow;

		if (!GetAce(dacl, i, (void **)&ace) ||
		    ace->AceType != ACCESS_ALLOWED_ACE_TYPE ||
		    (ace->AceFlags & INHERIT_ONLY_ACE))
			continue;
		allow = (ACCESS_ALLOWED_ACE *)ace;
		if ((allow->Mask & WFILE_WRITE_RIGHTS) == 0 ||
		    wfile_sid_trusted((PSID)&allow->SidStart, own))
			continue;
		if (!ConvertSidToStringSidA((PSID)&allow->SidStart, &name))
			name = NULL;
		ret = zerr_set(err, ZERR_FORBIDDEN, "%s '%.400s' may be "
		    "written by %s, who is neither SYSTEM, an administrator "
		    "nor zeusd's account; refusing it (remove that write "
		    "permission)", what, path, name != NULL ? name :
		    "another account");
		if (name != NULL)
			LocalFree(name);
	}
	free(own);
	LocalFree(sd);
	return ret;
}

int
wfile_read(const char *path, const char *what, size_t max, bool trusted,
    char **buf, size_t *len, struct zerr *err)
{
	wchar_t wpath[WFILE_PATH_MAX];
	char why[160], *b;
	DWORD got = 0;
	size_t n = 0;
	HANDLE h;
	int rc = 0;

	*buf = NULL;
	*len = 0;
	if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, wpath,
	    WFILE_PATH_MAX) == 0)
		return zerr_set(err, ZERR_INVALID, "cannot open %s '%.400s': "
		    "not a valid UTF-8 path of at most %d characters", what,
		    path, WFILE_PATH_MAX - 1);
	h = CreateFileW(wpath, GENERIC_READ | READ_CONTROL, FILE_SHARE_READ,
	    NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
	if (h == INVALID_HANDLE_VALUE) {
		DWORD e = GetLastError();

		return zerr_set(err, e == ERROR_ACCESS_DENIED ? ZERR_FORBIDDEN :
		    ZERR_INVALID, "cannot open %s '%.400s': %s", what, path,
		    wfile_error(e, why, sizeof(why)));
	}
	if (GetFileType(h) != FILE_TYPE_DISK) {
		CloseHandle(h);
		return zerr_set(err, ZERR_INVALID, "%s '%.400s' is not a "
		    "regular file", what, path);
	}
	if (trusted && wfile_check_dacl(h, path, what, err) != 0) {
		CloseHandle(h);
		return -1;
	}
	if ((b = malloc(max + 2)) == NULL) {
		CloseHandle(h);
		return zerr_set(err, ZERR_INTERNAL, "out of memory");
	}
	/* One extra byte tells "exactly the limit" from "too large". */
	do {
		if (!ReadFile(h, b + n, (DWORD)(max + 1 - n), &got, NULL)) {
			rc = zerr_set(err, ZERR_INVALID, "cannot read %s "
			    "'%.400s': %s", what, path,
			    wfile_error(GetLastError(), why, sizeof(why)));
			break;
		}
		n += got;
	} while (got > 0 && n < max + 1);
	CloseHandle(h);
	if (rc == 0 && n == 0)
		rc = zerr_set(err, ZERR_INVALID, "%s '%.400s' is empty", what,
		    path);
	else if (rc == 0 && n > max)
		rc = zerr_set(err, ZERR_INVALID, "%s '%.400s' is larger than "
		    "%zu bytes", what, path, max);
	if (rc != 0) {
		SecureZeroMemory(b, max + 2);
		free(b);
		return -1;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}
