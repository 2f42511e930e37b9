import unittest

from booklist.shelf import Shelf


def shelf_of(count):
    shelf = Shelf()
    for n in range(count):
        shelf.add("Book %d" % (n + 1), "Author %d" % (n + 1))
    return shelf


class ShelfTest(unittest.TestCase):
    def test_exact_pages(self):
        self.assertEqual([len(p) for p in shelf_of(20).pages(per_page=10)], [10, 10])

    def test_last_page_partly_filled(self):
        pages = shelf_of(25).pages(per_page=10)
        self.assertEqual([len(p) for p in pages], [10, 10, 5])
        self.assertEqual(pages[-1][-1], ("Book 25", "Author 25"))

    def test_empty_shelf(self):
        self.assertEqual(shelf_of(0).pages(), [])


if __name__ == "__main__":
    unittest.main()
