// A shopping cart for the inventory's web front.

export interface Line {
  sku: string;
  quantity: number;
  priceCents: number;
}

export class Cart {
  private lines: Line[] = [];

  add(line: Line): void {
    if (line.quantity <= 0) {
      throw new Error("quantity must be positive");
    }
    this.lines.push(line);
  }

  totalCents(): number {
    return this.lines.reduce((sum, line) => sum + line.quantity * line.priceCents, 0);
  }
}
