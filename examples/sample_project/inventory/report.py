"""Summaries of a stock for people."""

from inventory.models import Item, Stock


def total_value(stock: Stock, catalog: dict[str, Item]) -> int:
    """The value of everything in stock, in cents."""
    total = 0
    for sku, count in stock.counts.items():
        if catalog.get(sku) is not None:
            total += catalog[sku].price_cents * count
    return total


def describe(stock: Stock, catalog: dict[str, Item]) -> str:
    """One line per item: name, count, value."""
    lines = []
    for sku, count in sorted(stock.counts.items()):
        item = catalog[sku]
        lines.append(f"{item.name}: {count} (${item.price_cents * count / 100:.2f})")
    return "\n".join(lines)
