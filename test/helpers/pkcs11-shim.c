/* A PKCS#11 module for tests that misbehave on demand: it hands out SoftHSM2's function list with C_Sign
 * replaced. Before each C_Sign it reads the file named by PKCS11_SHIM_CONTROL:
 *   "pass"           forward to SoftHSM2
 *   "sleep <ms>"     wait, then forward (a slow token)
 *   "fail <ckr>"     answer <ckr> (decimal) every time (a failing token)
 *   "flaky <ckr>"    answer <ckr> on odd-numbered calls, forward on even ones (a transient fault)
 * and appends "call <n> <mode>" per call (and "slept <n>" when a sleep ends) to the file named by
 * PKCS11_SHIM_LOG, so tests can count attempts and see whether a slow call is still in the token. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pkcs11.h"

static CK_FUNCTION_LIST shim;
static CK_FUNCTION_LIST_PTR real;
static long calls;

static void note(const char *format, long n, const char *mode) {
  const char *log = getenv("PKCS11_SHIM_LOG");
  FILE *l = log ? fopen(log, "a") : NULL;
  if (l) {
    fprintf(l, format, n, mode);
    fclose(l);
  }
}

static CK_RV shim_sign(CK_SESSION_HANDLE session, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len) {
  long n = __sync_add_and_fetch(&calls, 1);
  char mode[16] = "pass";
  long arg = 0;
  const char *control = getenv("PKCS11_SHIM_CONTROL");
  FILE *f = control ? fopen(control, "r") : NULL;
  if (f) {
    if (fscanf(f, "%15s %ld", mode, &arg) < 1) strcpy(mode, "pass");
    fclose(f);
  }
  note("call %ld %s\n", n, mode);
  if (strcmp(mode, "sleep") == 0) {
    struct timespec ts = { arg / 1000, (arg % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    note("slept %ld%s\n", n, "");
  }
  if (strcmp(mode, "fail") == 0 || (strcmp(mode, "flaky") == 0 && n % 2 == 1)) {
    /* A failed C_Sign ends the operation: finish SoftHSM's into a scratch buffer, then fail. */
    CK_BYTE scratch[1024];
    CK_ULONG scratch_len = sizeof scratch;
    real->C_Sign(session, data, len, scratch, &scratch_len);
    return (CK_RV)arg;
  }
  return real->C_Sign(session, data, len, sig, sig_len);
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list) {
  if (!real) {
    const char *path = getenv("PKCS11_SHIM_MODULE");
    void *lib = dlopen(path ? path : "/usr/lib/softhsm/libsofthsm2.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return CKR_GENERAL_ERROR;
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(lib, "C_GetFunctionList");
    if (!get || get(&real) != CKR_OK) return CKR_GENERAL_ERROR;
    shim = *real;
    shim.C_Sign = shim_sign;
  }
  *list = &shim;
  return CKR_OK;
}
