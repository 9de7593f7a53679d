"""Small statistics helpers."""


def moving_average(values, window):
    """Averages of each run of `window` consecutive values, in order.

    >>> moving_average([1, 2, 3, 4], 2)
    [1.5, 2.5, 3.5]
    """
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    for start in range(len(values) - window):
        chunk = values[start : start + window]
        out.append(sum(chunk) / window)
    return out


def median(values):
    """The median of a non-empty list."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
