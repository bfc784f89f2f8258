// Functions, overrides and properties, for the differential test against ast-grep.
package shapes

interface Shape {
    fun area(): Double
}

class Square(private val side: Double) : Shape {
    override fun area(): Double = side * side

    fun scaled(by: Double): Square {
        return Square(side * by)
    }
}

class Circle(val radius: Double) : Shape {
    override fun area(): Double = 3.14159 * radius * radius
}

fun total(shapes: List<Shape>): Double {
    return shapes.sumOf { it.area() }
}

fun main() {
    println(total(listOf(Square(2.0), Circle(1.0))))
}
