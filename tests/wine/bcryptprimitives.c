/* A stand-in for Windows' bcryptprimitives.dll, for Wine 8, which lacks it.
 *
 * Rust's standard library (1.78 and later) imports ProcessPrng from
 * bcryptprimitives.dll to seed its hash maps; Wine 8 has no such DLL, so a
 * Rust executable does not even start. This one export is enough: it fills
 * the buffer from RtlGenRandom (SystemFunction036 in advapi32), Windows'
 * older interface to the same generator. The test harness compiles it with
 * x86_64-w64-mingw32-gcc into its private Wine prefix's system32 only; it is
 * never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
