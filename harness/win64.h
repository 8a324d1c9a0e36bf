/* kerngen test harness: what the shared harness sources (runner.c,
 * vectors.c) need on Windows and the C runtime of MinGW-w64 lacks, or does
 * differently. Included only when _WIN32 is defined; implemented in win64.c.
 * The Linux build never sees this file. */
#ifndef KG_WIN64_H
#define KG_WIN64_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit status of the runner when a kernel faults (access violation, illegal
 * instruction, ...): the handler installed by kg_win64_init() names the
 * exception on stderr and ends the process with it, where Linux would kill
 * the runner with a signal. */
#define KG_WIN64_CRASH_STATUS 3

/* Installs that handler, keeps Windows from showing error dialogs or
 * starting a debugger, and makes files open in binary mode, so the output
 * has "\n" line ends exactly as on Linux. Call first thing in main(). */
void kg_win64_init(void);

/* 64 random bits from the system generator (in place of /dev/urandom);
 * 0 on failure. */
uint64_t kg_win64_random64(void);

/* POSIX getline(), which the Microsoft C runtime does not have. */
ssize_t kg_win64_getline(char **line, size_t *cap, FILE *f);
#define getline kg_win64_getline

#endif
