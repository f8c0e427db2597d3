/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain corpus replay driver (STYLE.md 7, like SQLite's test/fuzzcheck.c):
 * linked with one fuzz_<name>.c instead of libFuzzer, it feeds every file
 * of the directories (or files) named on the command line to
 * LLVMFuzzerTestOneInput once, so gcc CI runs each corpus as a ctest. Exit
 * status 1 if an argument cannot be read or names no input at all.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    /* an exact-size heap copy, so ASan sees reads past the input */
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz_replay: cannot stat %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 1;
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) {
                fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
                closedir(d);
                return 1;
            }
            files++;
        }
        if (d != NULL)
            closedir(d);
    }
    printf("fuzz_replay: %d inputs\n", files);
    return files > 0 ? 0 : 1;
}
