#include "shapes.hpp"

double total_area(const Shape *const *shapes, int n) {
    double total = 0;
    for (int i = 0; i < n; ++i) total += shapes[i]->area();
    return total;
}
