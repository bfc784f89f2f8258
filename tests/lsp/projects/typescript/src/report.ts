import { Circle, Shape, Square } from "./shapes";

/** Sum of the areas of `shapes`. */
export function totalArea(shapes: Shape[]): number {
  return shapes.reduce((acc, s) => acc + s.area(), 0);
}

export function describe(shape: Shape): string {
  const label = "naïve 😀 shape"; const size = shape.area();
  return `${label}: ${size}`;
}

const items: Shape[] = [new Square(2), new Circle(1)];
console.log(totalArea(items), describe(items[0]));
