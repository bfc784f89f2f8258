#include <stdio.h>
#include "shapes.h"

int main(void) {
    struct square sq = {2.0};
    double total = square_area(&sq);
    printf("%f\n", total);
    return 0;
}
