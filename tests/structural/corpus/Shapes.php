<?php
// Methods, properties and calls, for the differential test against ast-grep.

interface Shape
{
    public function area(): float;
}

class Square implements Shape
{
    private float $side;

    public function __construct(float $side)
    {
        $this->side = $side;
    }

    public function area(): float
    {
        return $this->side * $this->side;
    }

    public function scaled(float $by, bool $round = false): Square
    {
        $result = new Square($this->side * $by);
        return $round ? $result->rounded() : $result;
    }
}

class Circle implements Shape
{
    public function __construct(private float $radius)
    {
    }

    public function area(): float
    {
        return 3.14159 * $this->radius * $this->radius;
    }
}

function total(array $shapes): float
{
    return array_sum(array_map(fn ($s) => $s->area(), $shapes));
}

echo total([new Square(2.0), new Circle(1.0)]);
