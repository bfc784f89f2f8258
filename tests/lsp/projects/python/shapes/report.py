from shapes.base import Circle, Shape, Square


def total_area(shapes: list[Shape]) -> float:
    """Sum of the areas of `shapes`."""
    return sum(s.area() for s in shapes)


def describe(shape: Shape) -> str:
    label = f"naïve 😀 {shape.area()}"
    return label


def main() -> None:
    items: list[Shape] = [Square(2.0), Circle(1.0)]
    print(total_area(items))
    print(describe(items[0]))
