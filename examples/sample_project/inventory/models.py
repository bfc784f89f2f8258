"""Items and the stock that holds them."""

from dataclasses import dataclass, field


@dataclass
class Item:
    """One kind of thing on a shelf."""

    sku: str
    name: str
    price_cents: int


@dataclass
class Stock:
    """How many of each item we hold."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, item: Item, quantity: int) -> None:
        """Put `quantity` more of `item` on the shelf."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self.counts[item.sku] = self.counts.get(item.sku, 0) + quantity

    def remove(self, item: Item, quantity: int) -> None:
        """Take `quantity` of `item` off the shelf."""
        held = self.counts.get(item.sku, 0)
        if quantity > held:
            raise ValueError(f"only {held} of {item.sku} in stock")
        self.counts[item.sku] = held - quantity
