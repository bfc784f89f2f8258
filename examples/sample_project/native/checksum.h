#ifndef CHECKSUM_H
#define CHECKSUM_H
#include <stddef.h>

/* A simple additive checksum over a buffer of SKU bytes. */
unsigned int checksum(const unsigned char *data, size_t len);

#endif
