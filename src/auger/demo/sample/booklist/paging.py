"""Splitting a list into fixed-size pages."""


def page_count(total, per_page):
    """Number of pages needed to show `total` items, `per_page` at a time."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return total // per_page


def page(items, number, per_page):
    """The items on page `number` (1-based)."""
    start = (number - 1) * per_page
    return items[start:start + per_page]
