#include <cstdio>
#include "shapes.hpp"

int main() {
    Square sq(2.0);
    Circle c(1.0);
    const Shape *items[] = {&sq, &c};
    std::printf("%f\n", total_area(items, 2));
    return 0;
}
