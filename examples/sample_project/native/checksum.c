#include "checksum.h"
#include <stdlib.h>

unsigned int checksum(const unsigned char *data, size_t len) {
    unsigned int sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum = sum * 31 + data[i];
    }
    return sum;
}

void release(unsigned char *buffer) {
    if (buffer != NULL) free(buffer);
}

void release_both(unsigned char *first, unsigned char *second) {
    if (first != NULL) free(second); /* frees what it did not test */
    if (second != NULL) free(second);
}
