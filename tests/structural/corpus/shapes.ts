// Classes with members of every kind, for the differential test against ast-grep.
export class Counter {
  private count: number = 0;
  static instances = 0;
  readonly label: string;

  constructor(label: string) {
    this.label = label;
    Counter.instances += 1;
  }

  get value(): number {
    return this.count;
  }

  set value(v: number) {
    this.count = v;
  }

  private bump(by: number): number {
    this.count += by;
    return this.count;
  }

  async reset(): Promise<void> {
    await Promise.resolve();
    this.count = 0;
  }
}

export function total(counters: Counter[]): number {
  return counters.reduce((sum, c) => sum + c.value, 0);
}

export interface Shape {
  area(): number;
  readonly name: string;
}

export type Unit = "px" | "em";

declare var DEBUG: boolean;
