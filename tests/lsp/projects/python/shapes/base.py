"""Shapes with an area."""

from abc import ABC, abstractmethod


class Shape(ABC):
    """Something with an area."""

    @abstractmethod
    def area(self) -> float:
        """The area in square units."""


class Square(Shape):
    def __init__(self, side: float) -> None:
        self.side = side

    def area(self) -> float:
        return self.side * self.side


class Circle(Shape):
    def __init__(self, radius: float) -> None:
        self.radius = radius

    def area(self) -> float:
        return 3.14159 * self.radius * self.radius
