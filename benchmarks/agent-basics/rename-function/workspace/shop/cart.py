"""A shopping cart."""

from shop.pricing import calc


class Cart:
    def __init__(self):
        self.lines = []

    def add(self, price, qty=1):
        self.lines.append((price, qty))

    def total(self):
        return calc(self.lines)
