/* A person resizing their console window, for tests/windows.rs: runs the
 * command line given as its last argument in this console, waits until the
 * file TRIGGER exists, then sets the console's buffer and window to ROWS x
 * COLS (what resizing a console window does), and exits with the command's
 * exit status. Usage: resize TRIGGER ROWS COLS "COMMAND LINE".
 *
 * Wine's console on a Unix terminal takes the terminal's size once and
 * never follows it, so a test cannot resize it from outside; a program in
 * the same console can, as here. Built by the test harness with
 * x86_64-w64-mingw32-gcc and run under Wine; never shipped. */
#include <windows.h>
#include <stdio.h>

/* Growing needs the buffer first, shrinking the window first. */
static BOOL resize(HANDLE out, SHORT rows, SHORT cols)
{
    COORD size = {cols, rows};
    SMALL_RECT window = {0, 0, cols - 1, rows - 1};
    if (SetConsoleScreenBufferSize(out, size))
        return SetConsoleWindowInfo(out, TRUE, &window);
    return SetConsoleWindowInfo(out, TRUE, &window) && SetConsoleScreenBufferSize(out, size);
}

int wmain(int argc, wchar_t **argv)
{
    if (argc != 5)
        return 2;
    STARTUPINFOW si = {sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(NULL, argv[4], NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        fprintf(stderr, "resize: cannot start %ls: error %lu\n", argv[4], GetLastError());
        return 2;
    }
    /* The test makes TRIGGER once the command is ready; a command that
     * ends first ends this too. */
    while (GetFileAttributesW(argv[1]) == INVALID_FILE_ATTRIBUTES) {
        if (WaitForSingleObject(pi.hProcess, 20) == WAIT_OBJECT_0)
            break;
    }
    if (WaitForSingleObject(pi.hProcess, 0) == WAIT_TIMEOUT
        && !resize(GetStdHandle(STD_OUTPUT_HANDLE), _wtoi(argv[2]), _wtoi(argv[3]))) {
        fprintf(stderr, "resize: cannot resize the console: error %lu\n", GetLastError());
        TerminateProcess(pi.hProcess, 3);
        return 3;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD status = 1;
    GetExitCodeProcess(pi.hProcess, &status);
    return (int)status;
}
