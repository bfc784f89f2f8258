/** Something with an area. */
export interface Shape {
  area(): number;
}

export class Square implements Shape {
  constructor(public side: number) {}
  area(): number {
    return this.side * this.side;
  }
}

export class Circle implements Shape {
  constructor(public radius: number) {}
  area(): number {
    return 3.14159 * this.radius * this.radius;
  }
}
