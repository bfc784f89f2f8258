# Methods, blocks and globals, for the differential test against ast-grep.
class Square
  attr_reader :side

  def initialize(side)
    @side = side
  end

  def area
    side * side
  end

  def scaled(by, round: false)
    result = Square.new(side * by)
    round ? result.rounded : result
  end
end

class Circle
  def initialize(radius)
    @radius = radius
  end

  def area
    3.14159 * @radius * @radius
  end
end

def total(shapes)
  shapes.map { |s| s.area }.sum
end

def report(shapes)
  shapes.each do |shape|
    $stdout.puts(shape.area)
  end
  puts total(shapes)
end

report([Square.new(2.0), Circle.new(1.0)])
