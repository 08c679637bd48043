/* An impostor for tests/windows.rs: creates the named pipe given as its
 * argument before a supervisor can, prints "holding <name>", and keeps it
 * until it is killed. Built by the test harness with x86_64-w64-mingw32-gcc
 * and run under Wine; never shipped. */
#include <windows.h>
#include <stdio.h>

int wmain(int argc, wchar_t **argv)
{
    if (argc != 2)
        return 2;
    HANDLE pipe = CreateNamedPipeW(argv[1], PIPE_ACCESS_DUPLEX, PIPE_TYPE_BYTE,
                                   PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, NULL);
    if (pipe == INVALID_HANDLE_VALUE) {
        printf("cannot create the pipe: error %lu\n", GetLastError());
        return 1;
    }
    printf("holding %ls\n", argv[1]);
    fflush(stdout);
    Sleep(INFINITE);
    return 0;
}
