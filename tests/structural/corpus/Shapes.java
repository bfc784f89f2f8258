// Fields and methods of every visibility, for the differential test against ast-grep.
package shapes;

import java.util.ArrayList;
import java.util.List;

public class Shapes {
    private final List<String> names = new ArrayList<>();
    private int count = 0;
    public static final int LIMIT = 10;

    public void add(String name) {
        names.add(name);
        count++;
    }

    public int size() {
        return count;
    }

    private void clear() {
        names.clear();
        count = 0;
    }

    protected String first() {
        if (names.isEmpty()) {
            return null;
        }
        return names.get(0);
    }
}
