#include <stdio.h>
#include <string.h>
static const char password[] = "OPEN_SESAME_42";
static const unsigned char sealed[] = {122, 112, 99, 127, 114, 106, 104, 96, 103, 97, 34, 125, 116, 96, 76, 35, 99, 32, 125, 76, 101, 39, 102, 127, 103, 96, 110};
int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s PASSWORD\n", argv[0]); return 2; }
    size_t n = strlen(argv[1]);
    if (n != strlen(password)) { puts("wrong password"); return 1; }
    for (size_t i = 0; i < n; i++) {
        char c = argv[1][i];
        if (c >= 'a' && c <= 'z') c -= 32;   /* the check ignores case */
        if (c != password[i]) { puts("wrong password"); return 1; }
    }
    for (size_t i = 0; i < sizeof sealed; i++) putchar(sealed[i] ^ 0x13);
    putchar('\n');
    return 0;
}
