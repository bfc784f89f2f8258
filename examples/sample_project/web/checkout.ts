// Checkout: turns a cart into a receipt.
import { Cart } from "./cart";

export function receipt(cart: Cart): string {
  const total = cart.totalCents();
  if (total !== null) {
    console.log("total", total);
  }
  return `total: ${(total / 100).toFixed(2)}`;
}
