"""Prices."""

TAX_RATE = 0.2


def calc(items):
    """Total price of (unit_price, quantity) pairs, tax included, rounded to cents."""
    subtotal = sum(price * qty for price, qty in items)
    return round(subtotal * (1 + TAX_RATE), 2)
