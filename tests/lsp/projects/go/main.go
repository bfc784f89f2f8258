package main

import (
	"fmt"

	"example.com/shapes/geo"
)

func main() {
	items := []geo.Shape{geo.Square{Side: 2}}
	fmt.Println(geo.TotalArea(items))
}
