#ifndef SHAPES_H
#define SHAPES_H

/* A square with a side length. */
struct square {
    double side;
};

/* The area of a square. */
double square_area(const struct square *sq);

#endif
