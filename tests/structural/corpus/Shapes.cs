// Properties and methods, for the differential test against ast-grep.
namespace Shapes
{
    public class Box
    {
        public int Width { get; set; }
        public int Height { get; set; }
        public string Name { get; }
        public int Area => Width * Height;

        public Box(string name)
        {
            Name = name;
        }

        public void Grow(int by)
        {
            Width += by;
            Height += by;
        }

        private int Perimeter()
        {
            return 2 * (Width + Height);
        }
    }
}
