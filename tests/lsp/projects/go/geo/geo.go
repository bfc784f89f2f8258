// Package geo has shapes with an area.
package geo

// Shape is something with an area.
type Shape interface {
	Area() float64
}

// Square is a square with a side length.
type Square struct {
	Side float64
}

// Area returns the area of the square.
func (s Square) Area() float64 {
	return s.Side * s.Side
}

// TotalArea sums the areas of shapes.
func TotalArea(shapes []Shape) float64 {
	total := 0.0
	for _, s := range shapes {
		total += s.Area()
	}
	return total
}
