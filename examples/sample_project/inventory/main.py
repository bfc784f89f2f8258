"""Build a small stock and print its report."""

from inventory.models import Item, Stock
from inventory.report import describe, total_value


def main() -> None:
    catalog = {
        "A1": Item("A1", "anvil", 4999),
        "B2": Item("B2", "bucket", 350),
    }
    stock = Stock()
    stock.add(catalog["A1"], 2)
    stock.add(catalog["B2"], 10)
    stock.remove(catalog["B2"], 3)
    print(describe(stock, catalog))
    print("total:", total_value(stock, catalog))


if __name__ == "__main__":
    main()
