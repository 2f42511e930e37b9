"""A shelf of books, listed a page at a time."""

from booklist.paging import page, page_count


class Shelf:
    def __init__(self):
        self.books = []

    def add(self, title, author):
        self.books.append((title, author))

    def pages(self, per_page=10):
        """Every page of the shelf, in order; the last one may be partly filled."""
        count = page_count(len(self.books), per_page)
        return [page(self.books, number, per_page) for number in range(1, count + 1)]
